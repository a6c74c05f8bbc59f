"""Baseline ordering on an overloaded smoke scenario: oracle >= edf >= vllm-fcfs attainment.

At its default 300 requests the smoke cluster drains every request within its TTFT deadline at
any arrival rate (all three attain 1.0), so the run is lengthened to 600 requests at 60 req/s:
then FCFS misses interactive deadlines that EDF meets.
"""

from __future__ import annotations

import pytest

from shared.metrics.summary import summarize

RATE, REQUESTS = 60.0, 600


@pytest.mark.parametrize("seed", [0, 1])
def test_sim_baseline_ordering_when_overloaded(smoke_run, seed):
    att = {
        stack: summarize(smoke_run(stack, seed, RATE, REQUESTS)).slo_attainment
        for stack in ("vllm-fcfs", "edf", "oracle")
    }
    assert att["vllm-fcfs"] < 0.95, f"not overloaded enough to discriminate: {att}"
    assert att["oracle"] >= att["edf"] >= att["vllm-fcfs"], att
    assert att["edf"] > att["vllm-fcfs"], att


def test_sim_smoke_default_rate_is_easy(smoke_run):
    """The unmodified smoke scenario is under capacity for the continuous-batching stacks."""
    for stack in ("vllm-fcfs", "edf", "oracle"):
        s = summarize(smoke_run(stack, 0))
        assert s.slo_attainment == 1.0, stack
        assert s.requests == 300 and s.rejected == 0 and s.unfinished == 0
