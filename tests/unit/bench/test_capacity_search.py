"""Capacity search on synthetic attainment curves: bracketing, bisection, edge cases, bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from slomesh.bench.capacity import BracketError, CapacitySettings, search_capacity


def step(at: float) -> Callable[[float], float]:
    """Attainment 1.0 up to `at` r/s (inclusive), 0.5 above."""
    return lambda rate: 1.0 if rate <= at else 0.5


def linear(knee: float) -> Callable[[float], float]:
    """1.0 up to `knee`, then falling linearly to 0 at 2 x knee (crosses 0.9 at 1.1 x knee)."""
    return lambda rate: 1.0 if rate <= knee else max(0.0, 1.0 - (rate - knee) / knee)


def always(value: float) -> Callable[[float], float]:
    return lambda _rate: value


# (name, curve, start, true capacity or None when the search cannot find one)
CASES = [
    ("step above start", step(13.0), 4.0, 13.0),
    ("step below start", step(3.0), 14.0, 3.0),
    ("step at start", step(10.0), 10.0, 10.0),
    ("step just below start", step(9.9), 10.0, 9.9),
    ("linear knee", linear(5.0), 8.0, 5.5),
    ("far above", step(200.0), 1.0, 200.0),
]


@pytest.mark.parametrize(("name", "curve", "start", "truth"), CASES, ids=[c[0] for c in CASES])
def test_finds_the_step_within_tolerance(
    name: str, curve: Callable[[float], float], start: float, truth: float
) -> None:
    res = search_capacity(curve, start, 0.9, rel_tol=0.05)
    assert res.lo_rps is not None and res.hi_rps is not None
    assert curve(res.lo_rps) >= 0.9 > curve(res.hi_rps)
    assert res.hi_rps / res.lo_rps - 1.0 <= 0.05
    assert res.capacity_rps == res.lo_rps
    assert res.capacity_rps <= truth < res.hi_rps or res.capacity_rps == pytest.approx(truth)
    assert res.iterations == len(res.probes) <= 16


def test_never_attained_is_zero_with_no_low_end() -> None:
    res = search_capacity(always(0.2), 8.0, 0.9, max_steps=4)
    assert res.capacity_rps == 0.0
    assert res.lo_rps is None
    assert res.hi_rps == 0.5
    assert [r for r, _ in res.probes] == [8.0, 4.0, 2.0, 1.0, 0.5]


def test_always_attained_is_the_highest_rate_probed() -> None:
    res = search_capacity(always(1.0), 2.0, 0.9, max_steps=3)
    assert res.capacity_rps == 16.0
    assert (res.lo_rps, res.hi_rps) == (16.0, None)
    assert res.iterations == 4


def test_target_one_needs_full_attainment() -> None:
    res = search_capacity(lambda r: 1.0 if r <= 6.0 else 0.999, 4.0, 1.0)
    assert res.capacity_rps <= 6.0 < res.hi_rps  # type: ignore[operator]


def test_given_bracket_is_bisected() -> None:
    res = search_capacity(step(7.0), 100.0, 0.9, bracket=(4.0, 8.0))
    assert res.probes[:2] == ((4.0, 1.0), (8.0, 0.5))
    assert res.capacity_rps <= 7.0 < res.hi_rps  # type: ignore[operator]


@pytest.mark.parametrize(
    ("bracket", "message"),
    [((8.0, 9.0), "low rate 8"), ((2.0, 4.0), "high rate 4")],
)
def test_bracket_that_does_not_bracket(bracket: tuple[float, float], message: str) -> None:
    with pytest.raises(BracketError, match=message):
        search_capacity(step(7.0), 1.0, 0.9, bracket=bracket)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"target": 0.0}, "target"),
        ({"target": 1.5}, "target"),
        ({"seeds": []}, "seeds"),
        ({"seeds": [0, -1]}, "seeds"),
        ({"seeds": [1, 1]}, "seeds"),
        ({"bracket": (5.0, 2.0)}, "bracket"),
        ({"bracket": (0.0, 2.0)}, "bracket"),
        ({"rel_tol": 0.0}, "rel_tol"),
        ({"workers": 3}, "workers"),
    ],
)
def test_settings_reject_bad_values(fields: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError, match=where):
        CapacitySettings.model_validate(fields)


def test_settings_defaults() -> None:
    s = CapacitySettings()
    assert (s.target, s.seeds, s.rel_tol, s.workers) == (0.9, [0, 1, 2], 0.05, 2)
