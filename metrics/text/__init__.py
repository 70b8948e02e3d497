"""Metrics on caption text against references: BLEU and ROUGE-L, CIDEr-D, the COCO
evaluation's own BLEU/ROUGE-L/METEOR, SPICE, and the PTB tokenisation and WordNet they use."""
