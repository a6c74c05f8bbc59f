"""bench-agree's swap report sets the replicas' live swaps side by side: those that ran while
another replica swapped too, and the median seconds of those and of the others."""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.bench.agree.scenario import overlapping_swaps


def log(*swaps: tuple[float, float]) -> dict[str, Any]:
    return {"swaps": [{"started_unix_s": t, "seconds": d, "ok": True} for t, d in swaps]}


@pytest.mark.parametrize(
    ("logs", "overlapping", "together_s", "alone_s"),
    [
        ({"r0": log((100, 12)), "r1": log((200, 14))}, 0, None, 13.0),
        ({"r0": log((100, 12)), "r1": log((105, 20))}, 2, 16.0, None),
        ({"r0": log((100, 12), (150, 12)), "r1": log((155, 18))}, 2, 15.0, 12.0),
        ({"r0": log((100, 12), (112, 12))}, 0, None, 12.0),  # one replica's swaps in a row
        ({"r0": log((100, 12)), "r1": log((112, 12))}, 0, None, 12.0),  # touching, not at once
    ],
)
def test_swaps_at_once_on_two_replicas_are_counted_apart(
    logs: dict[str, Any], overlapping: int, together_s: float | None, alone_s: float | None
) -> None:
    got = overlapping_swaps(logs)
    assert got == {
        "live_swaps_overlapping": overlapping,
        "overlapping_median_s": together_s,
        "alone_median_s": alone_s,
    }


def test_swaps_without_a_start_time_give_no_figure() -> None:
    """A replica of an older build logged no start: nothing to set side by side."""
    logs: dict[str, Any] = {"r0": {"swaps": [{"seconds": 12.0, "ok": True}]}, "r1": {"swaps": []}}
    assert overlapping_swaps(logs) == {
        "live_swaps_overlapping": None,
        "overlapping_median_s": None,
        "alone_median_s": None,
    }


def test_a_failed_swap_is_left_out() -> None:
    logs = {"r0": log((100, 12)), "r1": {"swaps": [{"started_unix_s": 101, "seconds": 3}]}}
    assert overlapping_swaps(logs)["live_swaps_overlapping"] == 0
