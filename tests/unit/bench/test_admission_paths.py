"""Admissions by path from the schedulers' counters (slomesh/bench/compare/admission_paths.py):
shards summed, a phase's difference of two readings with its paths and placements per replica,
the shards found in a mesh config; the hot-path page reports them with the scheduler's CPU per
admission."""

from __future__ import annotations

from typing import Any

import pytest

from slomesh.bench.compare.admission_paths import (
    admitted,
    describe,
    difference,
    shard_names,
    total,
)
from slomesh.bench.compare.hot_path import render
from slomesh.bench.compare.run import PhaseCounters
from slomesh.bench.compare.stats import SystemResult
from slomesh.bench.compare.systems import SystemSpec


def _spec(counters: Any = None) -> SystemSpec:
    return SystemSpec("slomesh", 1, ["x"], "http://127.0.0.1:1/v1", "m", counters=counters)


def _counts(
    fast: int, admit: int, queued: int, refused: int, syncs: int = 0, **by: int
) -> dict[str, Any]:
    return {
        "fast_path": fast,
        "admit": admit,
        "queued": queued,
        "refused": refused,
        "sync_calls": syncs,
        "by_replica": dict(sorted(by.items())),
    }


@pytest.mark.parametrize(
    ("snapshots", "want"),
    [
        ([], _counts(0, 0, 0, 0)),
        ([_counts(3, 1, 1, 0, r0=4)], _counts(3, 1, 1, 0, r0=4)),
        (
            [_counts(3, 1, 1, 0, 2, r0=4), _counts(5, 2, 0, 7, 3, r0=1, r1=6)],
            _counts(8, 3, 1, 7, 5, r0=5, r1=6),
        ),
    ],
)
def test_total_sums_the_shards(snapshots: list[dict[str, Any]], want: dict[str, Any]) -> None:
    assert total(snapshots) == want


@pytest.mark.parametrize(
    ("after", "before", "want"),
    [
        (
            _counts(10, 2, 1, 0, 9, r0=12),
            _counts(4, 2, 1, 0, 5, r0=6),
            _counts(6, 0, 0, 0, 4, r0=6),
        ),
        (  # a replica with no new placement is left out; one first placed now shows
            _counts(4, 5, 2, 3, r0=6, r1=3),
            _counts(4, 2, 1, 1, r0=6),
            _counts(0, 3, 1, 2, r1=3),
        ),
        (_counts(1, 0, 0, 0, r0=1), _counts(1, 0, 0, 0, r0=1), _counts(0, 0, 0, 0)),
    ],
)
def test_difference_is_the_phase(
    after: dict[str, Any], before: dict[str, Any], want: dict[str, Any]
) -> None:
    assert difference(after, before) == want


def test_shard_names_are_the_scheduler_applications() -> None:
    sched = "services.scheduler.deployment:build_app"
    config = {
        "applications": [
            {"name": "replica-0", "import_path": "services.replica.deployment:build_app"},
            {"name": "scheduler", "import_path": sched},
            {"name": "scheduler-1", "import_path": sched},
            {"name": "ingress", "import_path": "services.ingress.deployment:build_app"},
        ]
    }
    assert shard_names(config) == ["scheduler", "scheduler-1"]


def test_describe_gives_the_fast_path_share_and_replicas() -> None:
    paths = _counts(3, 1, 0, 0, **{"replica-0": 3, "replica-1": 1})
    assert admitted(paths) == 4
    assert describe(paths) == (
        "4 admitted: 3 on lease credits (fast path, 75%), 1 by Admit (0 of them queued first); "
        "0 refused; placements: replica-0 3, replica-1 1"
    )
    assert describe(_counts(0, 0, 0, 2)).startswith("no admissions counted")
    with_syncs = _counts(3, 1, 0, 0, 2, **{"replica-0": 4})
    assert describe(with_syncs).endswith(
        "placements: replica-0 4; 2 Sync calls (0.50 per admission)"
    )


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


@pytest.mark.parametrize(
    ("readings", "want"),
    [
        # (the counters' readings in order; the phase's admissions, or none without a reading)
        (
            [
                {"fast_path": 2, "admit": 1, "by_replica": {"r0": 3}},
                {"fast_path": 9, "admit": 1, "refused": 1, "by_replica": {"r0": 10}},
            ],
            _counts(7, 0, 0, 1, r0=7),  # a reading without Sync calls (an older scheduler)
        ),
        ([None, {"fast_path": 1}], None),  # the first reading failed: no figure, not a wrong one
        ([{"fast_path": 1}, None], None),
    ],
)
def test_phase_counters_give_the_difference_over_the_phase(
    readings: list[Any], want: dict[str, Any] | None
) -> None:

    left = list(readings)
    spec = _spec(lambda: left.pop(0))
    result = SystemResult("slomesh", 1)
    marks = PhaseCounters(spec, result)
    marks.start()
    marks.end("concurrency 8")
    assert result.admissions.get("concurrency 8") == want


def test_a_system_without_counters_has_no_admissions() -> None:

    result = SystemResult("bare-vllm", 1)
    marks = PhaseCounters(_spec(), result)
    marks.start()
    marks.end("concurrency 8")
    assert result.admissions == {}
