"""QLM's output-length estimates: predictor histograms, length hints from the ingress, oracle."""

from __future__ import annotations

import dataclasses
import math

import pytest

from services.predictor.core.registry import create_predictor
from services.scheduler.core.qlm.length_estimates import (
    LengthEstimator,
    TrueLengths,
    hint_from_prediction,
    length_std,
)
from shared.domain import SLO, LengthHint, Request


def _req(max_tokens: int = 512, hint: LengthHint | None = None) -> Request:
    return Request(
        "r", "m", 100, max_tokens, 0.0, SLO(1.0), true_output_tokens=40, length_hint=hint
    )


@pytest.mark.parametrize(
    ("upper", "probs", "mean", "cap", "std"),
    [
        ((10, 20), (1.0, 0.0), 5.0, 100, 0.0),  # all mass at midpoint 5
        ((10, 20), (0.5, 0.5), 10.0, 100, 5.0),  # midpoints 5 and 15
        ((10, 20), (0.5, 0.5), 8.5, 12, math.sqrt(0.5 * 25 + 0.5 * 144 - 8.5**2)),  # cap 12
    ],
)
def test_qlm_length_std_table(upper, probs, mean, cap, std):
    assert length_std(upper, probs, mean, cap) == pytest.approx(std)


def test_qlm_hint_from_prediction_caps_and_rejects_empty():
    hint = hint_from_prediction(900.0, (10, 1000), (0.0, 1.0), 300, "learned:x")
    assert hint is not None and hint.mean_tokens == 300.0 and hint.source == "learned:x"
    assert hint_from_prediction(0.0, (), (), 300, "") is None


def test_qlm_estimator_prefers_the_hint_over_its_own_predictor():
    est = LengthEstimator(create_predictor("online-histogram"))
    own = est.estimate(_req())
    hinted = est.estimate(_req(hint=LengthHint(77.0, 12.0, "learned")))
    assert (hinted.mean_tokens, hinted.std_tokens, hinted.max_tokens) == (77.0, 12.0, 512)
    assert own.mean_tokens != 77.0
    capped = est.estimate(_req(max_tokens=50, hint=LengthHint(77.0, 12.0)))
    assert capped.mean_tokens == 50


def test_qlm_true_lengths_ignore_hints():
    r = dataclasses.replace(_req(), length_hint=LengthHint(500.0, 1.0))
    assert TrueLengths().estimate(r).mean_tokens == 40


@pytest.mark.parametrize(("mean", "std"), [(-1.0, 0.0), (1.0, -1.0), (math.nan, 0.0)])
def test_qlm_length_hint_validation(mean, std):
    with pytest.raises(ValueError, match="length_hint"):
        LengthHint(mean, std)
