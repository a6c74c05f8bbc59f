"""Predictor registry by name, and the histogram summary maths on hand-made histograms."""

from __future__ import annotations

import numpy as np
import pytest

from services.predictor.core import (
    PREDICTORS,
    LengthDistribution,
    OnlineHistogramPredictor,
    create_predictor,
    restore_predictor,
    summarize,
)
from shared.policy import UnknownNameError

UPPER = (10, 20, 40)


def test_registry_builds_by_name_with_config() -> None:
    p = create_predictor("online-histogram", {"seed_prior": "uniform", "prior_strength": 3})
    assert isinstance(p, OnlineHistogramPredictor)
    assert p.config.prior_strength == 3
    assert PREDICTORS.names() == ["learned", "online-histogram"]


@pytest.mark.parametrize(
    "call", [lambda: create_predictor("nope"), lambda: restore_predictor({"kind": "nope"})]
)
def test_unknown_name_lists_valid_names(call: object) -> None:
    with pytest.raises(UnknownNameError, match="valid: learned, online-histogram") as exc:
        call()  # type: ignore[operator]
    assert exc.value.valid == ["learned", "online-histogram"]


@pytest.mark.parametrize(
    ("weights", "centres", "cap", "mean", "p50", "p90", "probs"),
    [
        # all mass in (10, 20] centred at 15: two halves of width 5 each
        ([0, 1, 0], [5, 15, 30], None, 15.0, 15.0, 19.0, [0, 1, 0]),
        # centre off the midpoint moves the median with it
        ([0, 1, 0], [5, 12, 30], None, 12.0, 12.0, 18.4, [0, 1, 0]),
        # half in the first bucket (centre 5), half in the last (centre 30)
        ([1, 0, 1], [5, 15, 30], None, 17.5, 10.0, 36.0, [0.5, 0, 0.5]),
        # cap at 20 (a bucket bound): the last bucket's mass becomes a point mass at 20
        ([1, 0, 1], [5, 15, 30], 20, 12.5, 10.0, 20.0, [0.5, 0.5, 0]),
        # cap at 15 inside (10, 20]: shape below 15 kept (1/2 of it, mean 12.5), rest at 15
        ([0, 1, 0], [5, 15, 30], 15, 13.75, 15.0, 15.0, [0, 1, 0]),
        # cap inside the first bucket [0, 10] with centre 5: 40% of it kept below 4
        ([1, 0, 0], [5, 15, 30], 4, 0.4 * 2 + 0.6 * 4, 4.0, 4.0, [1, 0, 0]),
    ],
)
def test_summarize_by_hand(
    weights: list[float],
    centres: list[float],
    cap: int | None,
    mean: float,
    p50: float,
    p90: float,
    probs: list[float],
) -> None:
    d = summarize(UPPER, np.asarray(weights, float), np.asarray(centres, float), cap, "t")
    assert d.mean_tokens == pytest.approx(mean)
    assert d.p50_tokens == pytest.approx(p50)
    assert d.p90_tokens == pytest.approx(p90)
    assert d.bucket_probs == pytest.approx(probs)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"bucket_probs": (0.5, 0.6)}, "sum to 1"),
        ({"bucket_probs": (1.0,)}, "bucket_probs"),
        ({"p50_tokens": 30.0}, "p50_tokens"),
        ({"mean_tokens": float("nan")}, "mean_tokens"),
        ({"bucket_upper_tokens": (20, 10)}, "ascending"),
    ],
)
def test_length_distribution_validates(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = {
        "mean_tokens": 10.0,
        "p50_tokens": 8.0,
        "p90_tokens": 20.0,
        "bucket_upper_tokens": (10, 20),
        "bucket_probs": (0.5, 0.5),
        "version": "t",
    }
    with pytest.raises(ValueError, match=field):
        LengthDistribution(**{**base, **kwargs})  # type: ignore[arg-type]


def test_to_dict_uses_message_field_names() -> None:
    d = summarize(UPPER, np.ones(3), np.asarray([5.0, 15.0, 30.0]), None, "v1")
    out = d.to_dict()
    assert out["predictor_version"] == "v1"
    assert out["bucket_upper_tokens"] == [10, 20, 40]
    assert set(out) == {
        "mean_tokens",
        "p50_tokens",
        "p90_tokens",
        "bucket_upper_tokens",
        "bucket_probs",
        "predictor_version",
    }
