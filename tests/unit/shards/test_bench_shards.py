"""`slomesh bench-shards`'s arithmetic: the simulator's costs from the live ladders (CPU per
admission of the one-shard mesh; the extra idle CPU of a shard of a split, per exchange and
peer) and the results page generated from the result file."""

from __future__ import annotations

import pytest

from slomesh.bench.shards_page import render
from slomesh.cli.bench_shards import measured_costs


def _step(cost_ms: float, errors: int = 0) -> dict[str, float]:
    return {
        "rate_rps": 80.0,
        "achieved_rps": 80.0,
        "p50_ms": 5.0,
        "p99_ms": 20.0,
        "errors": errors,
        "scheduler_cpu_per_admission_ms": cost_ms,
    }


LIVE = [
    {
        "shards": 1,
        "idle_scheduler_cpu_per_s": 0.010,
        "steps": [_step(2.0), _step(3.0), _step(9.0, 4)],
    },
    {"shards": 2, "idle_scheduler_cpu_per_s": 0.030, "steps": [_step(2.5)]},
]


def test_costs_come_from_the_one_shard_ladder_and_the_idle_split() -> None:
    admit, exchange = measured_costs(LIVE)
    assert admit == 2.5  # median of the error-free steps
    # each of 2 shards idles at 15 ms/s, 5 ms/s above the lone scheduler: per 200 ms, 1 peer
    assert exchange == pytest.approx(1.0)


def test_the_page_shows_every_figure() -> None:
    page = render(
        {
            "command": "slomesh bench-shards --live",
            "live": LIVE,
            "costs": {"admit_cost_ms": 2.5, "exchange_cost_ms": 1.0, "source": "the live ladder"},
            "capacity": [
                {"shards": 1, "capacity_rps": 300.0},
                {"shards": 2, "capacity_rps": 570.0},
            ],
            "fairness": [
                {
                    "shards": 2,
                    "jain_median": 0.98,
                    "jain_by_seed": [0.98],
                    "attainment_median": 0.7,
                    "light_attainment_median": 1.0,
                    "max_usage_staleness_s": 0.2,
                }
            ],
        }
    )
    assert "`slomesh bench-shards --live`" in page
    assert "| 2 | 570 | 1.90x |" in page
    assert "| 2 | 0.980 | 0.980 | 70.0% | 100.0% | 0.20 |" in page
    assert "1 shard(s): 10.0 ms/s, 2 shard(s): 30.0 ms/s" in page


def test_cpu_per_admission_divides_by_the_admitted_requests_else_the_served() -> None:
    from slomesh.bench.shards_live import per_admission

    step: dict[str, object] = {"n": 100, "achieved_rps": 50.0}
    per_admission(step, 0.6, 300)  # 300 admitted, 100 served in 2 s
    assert step["scheduler_cpu_per_admission_ms"] == pytest.approx(2.0)
    assert step["admitted_rps"] == pytest.approx(150.0)
    assert step["denominator"] == "admitted"
    old: dict[str, object] = {"n": 100, "achieved_rps": 50.0}
    per_admission(old, 0.6, 0)  # a scheduler that does not count its admissions
    assert old["scheduler_cpu_per_admission_ms"] == pytest.approx(6.0)
    assert old["denominator"] == "served"


def test_the_ladder_gives_the_fast_paths_share_of_admissions() -> None:
    counted = {**_step(1.0), "admitted": 200, "fast_path": 150, "admitted_rps": 100.0}
    run = {"shards": 1, "idle_scheduler_cpu_per_s": 0.0, "steps": [counted, _step(2.0)]}
    page = render({"command": "c", "live": [run]})
    assert "| 1 | 80 | 100 | 75% | 80 |" in page
    assert "| 1 | 80 | 80 | - | 80 |" in page  # a step without the count
