"""Credit-based batching (SCORPIO §3.4): C_r += TRP(r); run r when C_r >= 1; C_r -= 1."""

from __future__ import annotations

import math

import pytest

from services.replica.core.scorpio.credit import CreditBatcher
from services.replica.core.scorpio.trp import trp


def run_iterations(
    batcher: CreditBatcher, schedule: dict[int, list[tuple[str, float]]], iterations: int
) -> dict[str, list[int]]:
    """Run iterations 1..n (running set from `schedule`, keyed by first iteration it applies)."""
    ran: dict[str, list[int]] = {}
    running: list[tuple[str, float]] = []
    for it in range(1, iterations + 1):
        running = schedule.get(it, running)
        for request_id in batcher.select(running):
            ran.setdefault(request_id, []).append(it)
    return ran


STPS_2_4_6 = [("R1", 2.0), ("R2", 4.0), ("R3", 6.0)]


@pytest.mark.parametrize(
    ("request_id", "expected"),
    [
        ("R1", list(range(1, 13))),
        ("R2", [2, 4, 6, 8, 10, 12]),
        ("R3", [3, 6, 9, 12]),
    ],
)
def test_worked_example_stp_2_4_6(request_id: str, expected: list[int]) -> None:
    ran = run_iterations(CreditBatcher(), {1: STPS_2_4_6}, 12)
    assert ran[request_id] == expected


def test_selected_ids_come_back_in_input_order() -> None:
    batcher = CreditBatcher()
    running = [("c", 4.0), ("a", 2.0), ("b", 4.0)]
    assert batcher.select(running) == ["a"]
    assert batcher.select(running) == ["c", "a", "b"]


@pytest.mark.parametrize(
    ("schedule", "iterations", "expected"),
    [
        # A looser request joining at iteration 3 starts at credit 0: TRP 0.5 -> runs at 4, 6, 8.
        (
            {1: [("R1", 2.0)], 3: [("R1", 2.0), ("R2", 4.0)]},
            8,
            {"R1": list(range(1, 9)), "R2": [4, 6, 8]},
        ),
        # A tighter request joining runs on its first iteration; R1 drops to TRP 0.5.
        (
            {1: [("R1", 2.0)], 3: [("R1", 2.0), ("T", 1.0)]},
            6,
            {"R1": [1, 2, 4, 6], "T": [3, 4, 5, 6]},
        ),
        # R2 leaves after iteration 4: R1 keeps running every iteration, R2 never again.
        (
            {1: [("R1", 2.0), ("R2", 4.0)], 5: [("R1", 2.0)]},
            8,
            {"R1": list(range(1, 9)), "R2": [2, 4]},
        ),
        # The tightest request leaves after iteration 1: R2's TRP becomes 1 (credit 0.5 kept),
        # so it runs every iteration from then on.
        (
            {1: [("R1", 2.0), ("R2", 4.0), ("R3", 8.0)], 2: [("R2", 4.0), ("R3", 8.0)]},
            7,
            {"R1": [1], "R2": [2, 3, 4, 5, 6, 7], "R3": [3, 5, 7]},
        ),
    ],
    ids=["loose-joins", "tight-joins", "leaves", "tightest-leaves"],
)
def test_running_set_changes(
    schedule: dict[int, list[tuple[str, float]]],
    iterations: int,
    expected: dict[str, list[int]],
) -> None:
    assert run_iterations(CreditBatcher(), schedule, iterations) == expected


def test_credit_accounting_and_forgetting_absent_ids() -> None:
    batcher = CreditBatcher()
    assert batcher.credit("R2") == 0.0
    batcher.select([("R1", 2.0), ("R2", 4.0)])
    assert batcher.credit("R1") == pytest.approx(0.0)
    assert batcher.credit("R2") == pytest.approx(0.5)
    batcher.select([("R1", 2.0)])  # R2 absent: its credit is dropped
    assert batcher.credit("R2") == 0.0
    # Rejoining starts from 0 again: TRP 0.5 -> not selected on its first iteration.
    assert batcher.select([("R1", 2.0), ("R2", 4.0)]) == ["R1"]
    assert batcher.credit("R2") == pytest.approx(0.5)


def test_forget_drops_credit() -> None:
    batcher = CreditBatcher()
    batcher.select([("R1", 2.0), ("R2", 4.0)])
    batcher.forget("R2")
    batcher.forget("unknown")  # no-op
    assert batcher.credit("R2") == 0.0
    assert batcher.select([("R1", 2.0), ("R2", 4.0)]) == ["R1"]


@pytest.mark.parametrize(
    ("epsilon", "expected"),
    [(1e-9, [10, 20]), (0.0, [11])],
)
def test_epsilon_absorbs_float_drift(epsilon: float, expected: list[int]) -> None:
    # TRP 0.1 credited ten times sums to 0.9999999999999999 in floats: the default epsilon runs
    # B at iteration 10 as the paper intends; without it B slips to iteration 11.
    ran = run_iterations(CreditBatcher(epsilon=epsilon), {1: [("A", 1.0), ("B", 10.0)]}, 20)
    assert ran["B"] == expected


def test_empty_running_set_selects_nothing() -> None:
    assert CreditBatcher().select([]) == []


@pytest.mark.parametrize(
    ("running", "match"),
    [
        ([("A", 1.0), ("A", 2.0)], "more than once"),
        ([("A", 0.0)], "stp"),
        ([("A", -1.0)], "stp"),
        ([("A", math.nan)], "stp"),
        ([("A", math.inf)], "stp"),
    ],
)
def test_invalid_running_set_raises(running: list[tuple[str, float]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CreditBatcher().select(running)


@pytest.mark.parametrize("epsilon", [-1e-9, math.nan, math.inf])
def test_invalid_epsilon_raises(epsilon: float) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        CreditBatcher(epsilon=epsilon)


@pytest.mark.parametrize(
    ("stps", "expected"),
    [
        ([], []),
        ([5.0], [1.0]),
        ([2.0, 4.0, 6.0], [1.0, 0.5, 1.0 / 3.0]),
        ([0.1, 0.05], [0.5, 1.0]),
    ],
)
def test_trp(stps: list[float], expected: list[float]) -> None:
    assert trp(stps) == pytest.approx(expected, rel=1e-12)
