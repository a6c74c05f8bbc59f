"""Admissions by path from the scheduler's spans (slomesh/bench/compare/admission_paths.py):
fast path, Admit (queued or not) and refusals told apart, placements counted per replica, the
window and foreign lines respected; the hot-path page reports them with the scheduler's CPU
per admission."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slomesh.bench.compare.admission_paths import admission_paths, admitted, describe
from slomesh.bench.compare.hot_path import render

T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def _grouping(second: int, **attrs: Any) -> str:
    start = f"2026-01-01T00:00:{second:02d}.000000Z"
    return json.dumps(
        {"name": "grouping", "start_time": start, "end_time": start, "attributes": attrs}
    )


FAST = {"slomesh.fast_path": True, "slomesh.admitted": True}
ADMIT = {"slomesh.admitted": True}


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        (
            [_grouping(1, **FAST, **{"slomesh.replica": "replica-0"})],
            {"fast_path": 1, "admit": 0, "queued": 0, "refused": 0, "by_replica": {"replica-0": 1}},
        ),
        (
            [
                _grouping(1, **ADMIT, **{"slomesh.replica": "replica-1"}),
                _grouping(2, **ADMIT, **{"slomesh.queued": True, "slomesh.replica": "replica-0"}),
                _grouping(3, **FAST, **{"slomesh.replica": "replica-1"}),
            ],
            {
                "fast_path": 1,
                "admit": 2,
                "queued": 1,
                "refused": 0,
                "by_replica": {"replica-0": 1, "replica-1": 2},
            },
        ),
        (
            [
                _grouping(1, **{"slomesh.admitted": False, "slomesh.reject_reason": "full"}),
                json.dumps({"name": "admission", "start_time": "2026-01-01T00:00:01Z"}),
                "not json",
                '{"name": "grouping"}',
                _grouping(59, **FAST, **{"slomesh.replica": "replica-0"}),  # outside the window
            ],
            {"fast_path": 0, "admit": 0, "queued": 0, "refused": 1, "by_replica": {}},
        ),
    ],
)
def test_admission_paths_counts_each_path(lines: list[str], want: dict[str, Any]) -> None:
    assert admission_paths(lines, (T0, T0 + 30)) == want


def test_describe_gives_the_fast_path_share_and_replicas() -> None:
    paths = admission_paths(
        [_grouping(1, **FAST, **{"slomesh.replica": "replica-0"})] * 3
        + [_grouping(2, **ADMIT, **{"slomesh.replica": "replica-1"})]
    )
    assert admitted(paths) == 4
    assert describe(paths) == (
        "4 admitted: 3 on lease credits (fast path, 75%), 1 by Admit (0 of them queued first); "
        "0 refused; placements: replica-0 3, replica-1 1"
    )
    assert describe(admission_paths([])).startswith("no admissions recorded")


def test_page_reports_admissions_and_scheduler_cpu_per_admission() -> None:
    slomesh = {
        "name": "slomesh",
        "ran": True,
        "c8_requests": 100,
        "cpu_outside_engine_s": 2.0,
        "cpu_by_process_s": {"ray::ServeReplica:scheduler:SchedulerDeployment": 0.08},
    }
    detail = {
        "systems": [slomesh],
        "admissions": {
            "concurrency 8": {
                "fast_path": 150,
                "admit": 50,
                "queued": 0,
                "refused": 0,
                "by_replica": {"replica-0": 200},
            }
        },
    }
    page = render(detail, "cmd")
    assert "200 admitted: 150 on lease credits (fast path, 75%)" in page
    assert "Scheduler CPU per admission: 0.40 ms (0.08 s over 200 admissions)" in page
    assert "target <= 0.5 ms: **met**" in page
