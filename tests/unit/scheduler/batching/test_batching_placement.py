"""Batch placers: SCLS max-min offloading, round-robin and least-loaded baselines."""

from __future__ import annotations

import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.placement import (
    BatchPlacer,
    LeastLoadedPlacer,
    MaxMinOffloader,
    RoundRobinPlacer,
)


def _batch(tag: str, seconds: float) -> FormedBatch:
    item = PoolItem(tag, 10, 10, slo_s=5.0, deadline_abs_s=5.0, arrival_s=0.0)
    return FormedBatch(items=(item,), padded_len=10, iterations=10, est_time_s=seconds)


def _tags(pairs: list[tuple[FormedBatch, str]]) -> list[tuple[str, str]]:
    return [(b.items[0].request_id, name) for b, name in pairs]


@pytest.mark.parametrize(
    ("times", "loads", "expected_pairs", "expected_loads"),
    [
        (  # SCLS max-min on two idle workers: 5->a, 4->b, 3->b, 3->a, 1->b (ties: name)
            [5, 4, 3, 3, 1],
            {"a": 0.0, "b": 0.0},
            [("t0", "a"), ("t1", "b"), ("t2", "b"), ("t3", "a"), ("t4", "b")],
            {"a": 8.0, "b": 8.0},
        ),
        (  # given in any order: the longest is still placed first
            [1, 3, 5, 3, 4],
            {"a": 0.0, "b": 0.0},
            [("t2", "a"), ("t4", "b"), ("t1", "b"), ("t3", "a"), ("t0", "b")],
            {"a": 8.0, "b": 8.0},
        ),
        (  # with initial loads: a is busier, so the 5 s batch goes to b
            [5, 4, 3, 3, 1],
            {"a": 2.0, "b": 0.0},
            [("t0", "b"), ("t1", "a"), ("t2", "b"), ("t3", "a"), ("t4", "b")],
            {"a": 9.0, "b": 9.0},
        ),
        (  # three workers, one busy
            [6, 2, 2],
            {"x": 0.0, "y": 1.0, "z": 10.0},
            [("t0", "x"), ("t1", "y"), ("t2", "y")],
            {"x": 6.0, "y": 5.0, "z": 10.0},
        ),
    ],
)
def test_max_min_offloading(
    times: list[float],
    loads: dict[str, float],
    expected_pairs: list[tuple[str, str]],
    expected_loads: dict[str, float],
) -> None:
    batches = [_batch(f"t{k}", t) for k, t in enumerate(times)]
    pairs = MaxMinOffloader().assign(batches, loads)
    assert _tags(pairs) == expected_pairs
    assert loads == pytest.approx(expected_loads)  # updated in place


def test_round_robin_position_persists_across_calls() -> None:
    rr = RoundRobinPlacer()
    loads = {"c": 0.0, "a": 0.0, "b": 0.0}
    first = rr.assign([_batch("t0", 1.0), _batch("t1", 2.0)], loads)
    second = rr.assign([_batch("t2", 3.0), _batch("t3", 4.0)], loads)
    assert _tags(first) == [("t0", "a"), ("t1", "b")]
    assert _tags(second) == [("t2", "c"), ("t3", "a")]
    assert loads == pytest.approx({"a": 5.0, "b": 2.0, "c": 3.0})


def test_round_robin_ignores_load_and_follows_membership_changes() -> None:
    rr = RoundRobinPlacer()
    rr.assign([_batch("t0", 1.0), _batch("t1", 1.0)], {"a": 0.0, "b": 0.0, "c": 0.0})
    # "b" was last; it left and "d" joined: continue with the next name after "b".
    loads = {"a": 100.0, "c": 100.0, "d": 0.0}
    pairs = rr.assign([_batch("t2", 1.0), _batch("t3", 1.0), _batch("t4", 1.0)], loads)
    assert _tags(pairs) == [("t2", "c"), ("t3", "d"), ("t4", "a")]
    assert loads == pytest.approx({"a": 101.0, "c": 101.0, "d": 1.0})


@pytest.mark.parametrize(
    ("times", "loads", "expected_pairs", "expected_loads"),
    [
        (
            [2, 2, 2],
            {"a": 5.0, "b": 0.0, "c": 1.0},
            [("t0", "b"), ("t1", "c"), ("t2", "b")],
            {"a": 5.0, "b": 4.0, "c": 3.0},
        ),
        (  # given order, not longest first: 1 s goes first, to the tied smaller name
            [1, 5],
            {"b": 0.0, "a": 0.0},
            [("t0", "a"), ("t1", "b")],
            {"a": 1.0, "b": 5.0},
        ),
    ],
)
def test_least_loaded(
    times: list[float],
    loads: dict[str, float],
    expected_pairs: list[tuple[str, str]],
    expected_loads: dict[str, float],
) -> None:
    batches = [_batch(f"t{k}", t) for k, t in enumerate(times)]
    pairs = LeastLoadedPlacer().assign(batches, loads)
    assert _tags(pairs) == expected_pairs
    assert loads == pytest.approx(expected_loads)


PLACERS: list[BatchPlacer] = [MaxMinOffloader(), RoundRobinPlacer(), LeastLoadedPlacer()]


@pytest.mark.parametrize("placer", PLACERS, ids=lambda p: p.name)
def test_empty_loads_is_an_error(placer: BatchPlacer) -> None:
    with pytest.raises(ValueError, match="loads"):
        placer.assign([_batch("t0", 1.0)], {})


@pytest.mark.parametrize("placer", PLACERS, ids=lambda p: p.name)
def test_no_batches_changes_nothing(placer: BatchPlacer) -> None:
    loads = {"a": 1.0, "b": 2.0}
    assert placer.assign([], loads) == []
    assert loads == {"a": 1.0, "b": 2.0}


def test_placer_names() -> None:
    assert [p.name for p in PLACERS] == ["max-min", "round-robin", "least-loaded"]
