"""The "learned" length predictor: an online ordinal SGD model over prompt, metadata and history.

Modules (each pure: no file I/O, no clock, seeds injected): dataset (examples, token count, the
by-prompt split), features (hashed feature rows), history (tenant history features), ordinal
(the threshold classifiers), predictor (the LengthPredictor and its persistence), codec (the model
file as bytes), training (offline training and calibration), baselines and metrics (held-out
evaluation). File I/O lives in services/predictor/data.py and model_store.py; the CLI is
`slomesh predictor` (slomesh/cli/predictor.py).
"""
