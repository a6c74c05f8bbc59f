"""RWTAccuracy: R² of predicted vs measured waits, binning, bounded memory."""

from __future__ import annotations

import math

import pytest

from services.scheduler.core.qlm.rwt_accuracy import RWTAccuracy, r2_score


def _log(pairs: list[tuple[float, float, int, int]], **kw: int) -> RWTAccuracy:
    acc = RWTAccuracy(**kw)
    for i, (pred, meas, qsize, groups) in enumerate(pairs):
        acc.predict(f"r{i}", pred, queue_size=qsize, groups_queued=groups)
        acc.observe(f"r{i}", meas)
    return acc


def test_perfect_predictions_score_one() -> None:
    acc = _log([(w, w, i, i) for i, w in enumerate([1.0, 4.0, 2.5, 9.0])])
    assert acc.r2() == pytest.approx(1.0)


def test_constant_predictions_score_at_most_zero() -> None:
    measured = [1.0, 4.0, 2.5, 9.0]
    mean = sum(measured) / len(measured)
    assert _log([(mean, m, 0, 0) for m in measured]).r2() == pytest.approx(0.0, abs=1e-12)
    assert (_log([(3.0, m, 0, 0) for m in measured]).r2() or 0.0) < 0.0


def test_r2_by_hand_and_undefined_cases() -> None:
    # measured 1, 2, 3 (SS_tot 2); predicted 1, 2, 4 (SS_res 1) -> R² = 0.5.
    assert r2_score([1.0, 2.0, 4.0], [1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert r2_score([], []) is None
    assert r2_score([1.0], [2.0]) is None
    assert r2_score([1.0, 3.0], [2.0, 2.0]) is None  # SS_tot = 0
    with pytest.raises(ValueError):
        r2_score([1.0], [1.0, 2.0])
    assert RWTAccuracy().r2() is None


def test_unobserved_and_unknown_are_ignored() -> None:
    acc = RWTAccuracy()
    acc.predict("a", 1.0, 3, 1)
    acc.predict("b", 2.0, 3, 1)
    acc.predict("never", 100.0, 3, 1)
    assert acc.observe("a", 1.0) and acc.observe("b", 2.0)
    assert not acc.observe("b", 5.0)  # already observed
    assert not acc.observe("ghost", 1.0)
    assert len(acc) == 2 and acc.pending == 1
    assert acc.r2() == pytest.approx(1.0)


def test_latest_prediction_wins() -> None:
    acc = RWTAccuracy()
    acc.predict("a", 10.0, 50, 6)
    acc.predict("a", 4.0, 20, 2)
    acc.observe("a", 4.5)
    (pair,) = acc.pairs()
    assert (pair.predicted_wait_s, pair.queue_size, pair.groups_queued) == (4.0, 20, 2)


def test_bounded_fifo() -> None:
    acc = _log([(float(i), float(i), 0, 0) for i in range(5)], max_pairs=3)
    assert [p.request_id for p in acc.pairs()] == ["r2", "r3", "r4"]
    pend = RWTAccuracy(max_pending=2)
    for rid in ("a", "b", "c"):
        pend.predict(rid, 1.0, 0, 0)
    assert pend.pending == 2
    assert not pend.observe("a", 1.0)  # oldest pending dropped
    assert pend.observe("c", 1.0)
    with pytest.raises(ValueError):
        RWTAccuracy(max_pairs=0)


def test_r2_by_bins() -> None:
    # groups_queued 0 and 1: noisy; 4..9: exact.
    pairs = [(1.0, 2.0, 1, 0), (2.0, 1.0, 2, 0), (5.0, 5.0, 9, 1), (7.0, 6.0, 9, 1)]
    pairs += [(float(g), float(g), 40 + g, g) for g in range(4, 10)]
    acc = _log(pairs)
    rows = acc.r2_by()
    assert [(label, n) for label, n, _ in rows] == [
        ("0", 2),
        ("1", 2),
        ("2-3", 0),
        ("4-7", 4),
        ("8+", 2),
    ]
    by = {label: r2 for label, _, r2 in rows}
    assert by["0"] == pytest.approx(1 - 2 / 0.5) and by["1"] == pytest.approx(1 - 1 / 0.5)
    assert by["2-3"] is None and by["4-7"] == pytest.approx(1.0) and by["8+"] == pytest.approx(1.0)
    by_size = acc.r2_by([0, 10, 40], key="queue_size")
    assert [(label, n) for label, n, _ in by_size] == [("0-9", 4), ("10-39", 0), ("40+", 6)]
    assert acc.r2_by([5]) == [("5+", 5, pytest.approx(1.0))]
    for bad in ([], [2, 2], [3, 1]):
        with pytest.raises(ValueError):
            acc.r2_by(bad)


def test_rejects_non_finite() -> None:
    acc = RWTAccuracy()
    with pytest.raises(ValueError):
        acc.predict("a", math.nan, 0, 0)
    acc.predict("a", 1.0, 0, 0)
    with pytest.raises(ValueError):
        acc.observe("a", math.inf)
    with pytest.raises(ValueError):
        acc.predict("b", 1.0, -1, 0)
