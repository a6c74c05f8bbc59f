"""The RWT error tracker: residual quantiles, widening, the scored log, and QLM using it."""

from __future__ import annotations

import pytest

from services.scheduler.core.qlm.rwt_error import (
    RWTErrorConfig,
    RWTErrorTracker,
    empirical_quantile,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3.0, 1.0, 2.0], 0.5, 2.0),  # rank ceil(0.5 * 4) = 2
        ([float(i) for i in range(1, 100)], 0.9, 90.0),  # rank ceil(0.9 * 100) = 90
        ([1.0, 2.0, 3.0], 0.99, 3.0),  # rank clamped to n
        ([5.0], 0.1, 5.0),
    ],
)
def test_empirical_quantile(values: list[float], q: float, expected: float) -> None:
    assert empirical_quantile(values, q) == expected


def test_empirical_quantile_of_nothing_fails() -> None:
    with pytest.raises(ValueError, match="empty"):
        empirical_quantile([], 0.5)


def tracker(**kw: float | int | bool | str) -> RWTErrorTracker:
    return RWTErrorTracker(
        RWTErrorConfig.model_validate({"min_samples": 3, "mode": "additive", **kw})
    )


def feed(t: RWTErrorTracker, pairs: list[tuple[float, float]]) -> None:
    for k, (point, measured) in enumerate(pairs):
        t.predict(f"r{k}", point, point, 1)
        t.observe(f"r{k}", measured)


@pytest.mark.parametrize(
    ("pairs", "point", "quantile", "expected"),
    [
        ([], 1.0, 2.0, 2.0),  # nothing tracked: the model's quantile
        ([(1.0, 2.0), (1.0, 2.0)], 1.0, 2.0, 2.0),  # below min_samples
        ([(1.0, 4.0), (1.0, 6.0), (1.0, 5.0)], 1.0, 2.0, 6.0),  # under-predicts by up to 5 s
        ([(5.0, 1.0), (5.0, 2.0), (5.0, 1.5)], 1.0, 2.0, 2.0),  # over-predicts: never narrower
    ],
)
def test_widen_adds_the_recent_residual_quantile(
    pairs: list[tuple[float, float]], point: float, quantile: float, expected: float
) -> None:
    t = tracker()
    feed(t, pairs)
    assert t.widen(point, quantile) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("pairs", "point", "quantile", "expected"),
    [
        ([(1.0, 2.0), (2.0, 6.0), (4.0, 4.0)], 10.0, 12.0, 30.0),  # waits up to 3x the point
        ([(2.0, 1.0), (4.0, 2.0), (1.0, 0.5)], 10.0, 12.0, 12.0),  # over-predicts: unchanged
        ([(0.0, 0.1), (0.0, 0.1), (0.0, 0.1)], 1.0, 0.5, 2.0),  # floor: 0.1 / 0.05 = 2
    ],
)
def test_ratio_mode_scales_the_point_by_the_recent_ratio(
    pairs: list[tuple[float, float]], point: float, quantile: float, expected: float
) -> None:
    t = tracker(mode="ratio")
    feed(t, pairs)
    assert t.widen(point, quantile) == pytest.approx(expected)


def test_only_the_latest_window_counts() -> None:
    t = tracker(window=3)
    feed(t, [(0.0, 100.0)] * 3 + [(0.0, 1.0)] * 3)  # the large errors aged out
    assert t.residual_quantile() == 1.0
    assert t.widen(0.0, 0.5) == 1.0


def test_scored_log_pairs_predictions_with_measured_waits() -> None:
    t = tracker(max_log=2)
    feed(t, [(1.0, 1.5), (1.0, 2.0)])
    t.predict("late", 2.0, 3.0, 5)
    t.predict("gone", 2.0, 3.0, 5)
    t.forget("gone")
    assert t.observe("gone", 1.0) is None
    assert t.observe("never", 1.0) is None
    s = t.observe("late", 4.0)
    assert s is not None and (s.point_s, s.quantile_s, s.measured_s, s.groups_queued) == (
        2.0,
        3.0,
        4.0,
        5,
    )
    assert [x.request_id for x in t.scored()] == ["r1", "late"]  # max_log keeps the newest
    assert [x.request_id for x in t.drain()] == ["r1", "late"]
    assert t.drain() == []


def test_recent_r2() -> None:
    t = tracker()
    feed(t, [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0)])
    assert t.recent_r2() == pytest.approx(1.0)
    feed(t, [(3.0, 1.0)])
    r2 = t.recent_r2()
    assert r2 is not None and r2 < 1.0


@pytest.mark.parametrize(("point", "quantile"), [(float("nan"), 1.0), (1.0, float("inf"))])
def test_non_finite_predictions_fail(point: float, quantile: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        tracker().predict("r", point, quantile, 1)


@pytest.mark.parametrize(
    ("field", "value"), [("quantile", 1.0), ("mode", "multiplicative"), ("ratio_floor_s", 0.0)]
)
def test_config_rejects_bad_values(field: str, value: float | str) -> None:
    with pytest.raises(ValueError, match=field):
        RWTErrorConfig.model_validate({field: value})


def test_default_mode_is_ratio() -> None:
    assert RWTErrorConfig().mode == "ratio"
