"""The scheduler's admission counters (services/scheduler/admission_counts.py): every admission
by path and replica, whatever the traces' sampling."""

from __future__ import annotations

import pytest

from services.scheduler.admission_counts import AdmissionCounts

CASES = [
    # (events: ("place", replica, fast_path, queued), ("refuse",) or ("sync",); the snapshot)
    (
        [],
        {"fast_path": 0, "admit": 0, "queued": 0, "refused": 0, "sync_calls": 0, "by_replica": {}},
    ),
    (
        [("place", "r0", True, False), ("place", "r0", True, False), ("sync",)],
        {
            "fast_path": 2,
            "admit": 0,
            "queued": 0,
            "refused": 0,
            "sync_calls": 1,
            "by_replica": {"r0": 2},
        },
    ),
    (
        [("place", "r1", False, True), ("place", "r0", False, False), ("refuse",)],
        {
            "fast_path": 0,
            "admit": 2,
            "queued": 1,
            "refused": 1,
            "sync_calls": 0,
            "by_replica": {"r0": 1, "r1": 1},
        },
    ),
    (  # a placement on a credit is never counted as queued
        [("place", "r0", True, True), ("refuse",), ("refuse",)],
        {
            "fast_path": 1,
            "admit": 0,
            "queued": 0,
            "refused": 2,
            "sync_calls": 0,
            "by_replica": {"r0": 1},
        },
    ),
]


@pytest.mark.parametrize(("events", "expected"), CASES)
def test_counts_follow_the_admissions(events: list[tuple], expected: dict) -> None:
    counts = AdmissionCounts()
    for event in events:
        if event[0] == "place":
            counts.placed(event[1], fast_path=event[2], queued=event[3])
        elif event[0] == "sync":
            counts.synced()
        else:
            counts.refusal()
    assert counts.snapshot() == expected
    assert counts.admitted == expected["fast_path"] + expected["admit"]


def test_the_snapshot_is_a_copy() -> None:
    counts = AdmissionCounts()
    counts.placed("r0", fast_path=True)
    snap = counts.snapshot()
    counts.placed("r0", fast_path=True)
    assert snap["by_replica"] == {"r0": 1}
