"""Image-text retrieval: ranked lists and score matrices, positive sets, the retrieval
metrics (recall@k, R-precision, mAP@R, PMRP, NCS, SR), semantic relevance and SAM, match
verification of positive sets, and BISON's choice between two images."""
