"""Statistics over ratings and scores: inter-annotator agreement, correlation with human
judgments, bootstrap confidence intervals, significance calls and the campaign's figures."""
