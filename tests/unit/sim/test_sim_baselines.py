"""Baseline ordering on an overloaded smoke scenario: oracle >= edf >= vllm-fcfs attainment.

The smoke scenario's default (500 requests at 60 req/s) is a short overload burst: FCFS misses
interactive deadlines that EDF meets. The seeded checks below use 600 requests at 60 req/s.
"""

from __future__ import annotations

import pytest

from shared.metrics.summary import summarize

RATE, REQUESTS = 60.0, 600

pytestmark = pytest.mark.slow  # whole smoke-scenario runs


@pytest.mark.parametrize("seed", [0, 1])
def test_sim_baseline_ordering_when_overloaded(smoke_run, seed):
    att = {
        stack: summarize(smoke_run(stack, seed, RATE, REQUESTS)).slo_attainment
        for stack in ("vllm-fcfs", "edf", "oracle")
    }
    assert att["vllm-fcfs"] < 0.95, f"not overloaded enough to discriminate: {att}"
    assert att["oracle"] >= att["edf"] >= att["vllm-fcfs"], att
    assert att["edf"] > att["vllm-fcfs"], att


def test_sim_smoke_default_discriminates(smoke_run, smoke):
    """At its defaults the smoke scenario separates the baselines (the main job's table)."""
    att = {st: summarize(smoke_run(st, 0)) for st in ("vllm-fcfs", "edf", "oracle")}
    assert att["vllm-fcfs"].slo_attainment < 1.0
    assert att["oracle"].slo_attainment >= att["edf"].slo_attainment
    assert att["edf"].slo_attainment >= att["vllm-fcfs"].slo_attainment
    for s in att.values():
        assert s.requests == smoke.workload.requests and s.rejected == 0 and s.unfinished == 0
