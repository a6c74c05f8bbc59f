"""Predictor service: output-length distributions at admission, learned online from completions."""
