"""The live scheduler turns the ingress's length prediction into the request's length hint."""

from __future__ import annotations

import pytest

from services.scheduler.args import with_length_hint
from shared.domain import SLO, Request
from shared.rpc.slomesh.v1 import common_pb2


def _req(max_tokens: int = 256) -> Request:
    return Request("r", "tiny-llama", 10, max_tokens, 0.0, SLO(1.0))


@pytest.mark.parametrize(
    ("prediction", "max_tokens", "mean", "source"),
    [
        (common_pb2.LengthPrediction(), 256, None, None),  # predictor down: no hint
        (
            common_pb2.LengthPrediction(
                mean_tokens=40.0,
                bucket_upper_tokens=[16, 64],
                bucket_probs=[0.25, 0.75],
                predictor_version="learned:abc+3",
            ),
            256,
            40.0,
            "learned:abc+3",
        ),
        (
            common_pb2.LengthPrediction(
                mean_tokens=400.0, bucket_upper_tokens=[1024], bucket_probs=[1.0]
            ),
            100,
            100.0,  # capped by max_tokens
            "",
        ),
    ],
)
def test_scheduler_length_hint_from_prediction(prediction, max_tokens, mean, source):
    out = with_length_hint(_req(max_tokens), prediction)
    if mean is None:
        assert out.length_hint is None
        return
    assert out.length_hint is not None
    assert out.length_hint.mean_tokens == mean
    assert out.length_hint.source == source
    assert out.length_hint.std_tokens >= 0
