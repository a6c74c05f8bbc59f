"""SCLS adaptive schedule interval: T = max(λ·min_w load(w), Γ) (SCLS Eq. 12)."""

from __future__ import annotations

import math

import pytest

from services.scheduler.core.batching.interval import adaptive_interval_s


@pytest.mark.parametrize(
    ("loads", "lam", "gamma", "expected"),
    [
        ({"a": 10.0, "b": 20.0}, 0.5, 3.0, 5.0),  # λ·min = 5 above Γ
        ({"a": 4.0}, 0.5, 3.0, 3.0),  # λ·min = 2 below Γ -> Γ
        ({"a": 6.0}, 0.5, 3.0, 3.0),  # equal
        ({"a": 0.0, "b": 100.0}, 0.5, 6.0, 6.0),  # an idle worker -> Γ
        ({"a": 30.0, "b": 12.0}, 0.25, 2.0, 3.0),  # min is b, not the first key
        ({"a": 100.0}, 1.0, 3.0, 100.0),
        ({"x": 50.0, "y": 40.0, "z": 45.0}, 0.5, 6.0, 20.0),
        ({"a": -1.0}, 0.5, 3.0, 3.0),  # slightly negative after subtraction: still Γ
    ],
)
def test_adaptive_interval(
    loads: dict[str, float], lam: float, gamma: float, expected: float
) -> None:
    assert adaptive_interval_s(loads, lam=lam, min_interval_s=gamma) == pytest.approx(expected)


def test_defaults_are_the_papers_deepspeed_settings() -> None:
    assert adaptive_interval_s({"a": 20.0}) == pytest.approx(10.0)  # λ = 0.5
    assert adaptive_interval_s({"a": 1.0}) == pytest.approx(3.0)  # Γ = 3 s


@pytest.mark.parametrize(
    ("loads", "lam", "gamma", "field"),
    [
        ({}, 0.5, 3.0, "loads"),
        ({"a": 1.0}, 0.0, 3.0, "lam"),
        ({"a": 1.0}, -0.5, 3.0, "lam"),
        ({"a": 1.0}, 1.5, 3.0, "lam"),
        ({"a": 1.0}, math.nan, 3.0, "lam"),
        ({"a": 1.0}, 0.5, 0.0, "min_interval_s"),
        ({"a": 1.0}, 0.5, -3.0, "min_interval_s"),
        ({"a": 1.0}, 0.5, math.inf, "min_interval_s"),
        ({"a": math.nan}, 0.5, 3.0, "loads"),
        ({"a": 1.0, "b": math.inf}, 0.5, 3.0, "loads"),
    ],
)
def test_invalid_arguments(loads: dict[str, float], lam: float, gamma: float, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        adaptive_interval_s(loads, lam=lam, min_interval_s=gamma)
