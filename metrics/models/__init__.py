"""Metrics computed by neural models (CLIP-S and RefCLIP-S, BERTScore) and the torch device
and batch sizes they run with."""
