"""The swap order's rule (shared/domain/swap_order.py), one table for the simulated engine, the
live model host and the scheduler's books, which all call it."""

from __future__ import annotations

import pytest

from shared.domain.swap_order import SwapOrder, swap_due


@pytest.mark.parametrize(
    ("ordered", "active", "running", "head", "due"),
    [
        (None, "A", False, None, None),  # no order: swaps follow the queue head
        (None, "A", False, "C", None),
        ("B", "A", True, None, None),  # a request of the active model still runs
        ("B", "A", False, "A", None),  # the active model's head runs first
        ("B", "A", False, None, "B"),  # nothing waits: load the ordered model ahead
        ("B", "A", False, "B", "B"),  # the head wants the ordered model
        ("B", "A", False, "C", None),  # a third model heads the line: its swap goes first
        ("B", "B", False, None, None),  # already active
    ],
)
def test_swap_due(
    ordered: str | None, active: str, running: bool, head: str | None, due: str | None
) -> None:
    assert swap_due(ordered, active, running, head) == due


def test_an_order_outlives_a_swap_to_a_third_model_and_ends_with_its_own() -> None:
    order = SwapOrder()
    order.order("B", "A")
    assert order.due("A", False, "C") is None  # the engine swaps to C first
    order.done("C")
    assert order.target == "B"  # still standing
    assert order.due("C", False, None) == "B"
    order.done("B")
    assert order.target is None
    order.order("A", "A")
    assert order.target is None  # an order to the active model is nothing to do
