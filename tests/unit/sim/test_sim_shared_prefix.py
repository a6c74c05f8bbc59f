"""The shared-prefix scenario end to end: prefix-aware placement raises the engines' hit rate."""

from __future__ import annotations

from functools import cache

import pytest

from shared.metrics.summary import StackSummary, summarize
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


@cache
def run(stack: str, requests: int = 600, rate: float = 12.0) -> StackSummary:
    spec = SCENARIOS.create("shared-prefix")
    wl = spec.workload.with_total_rate(rate).model_copy(update={"requests": requests})
    return summarize(Simulator(spec.cluster, STACKS.create(stack), generate(wl, 0)).run())


@pytest.mark.slow  # three whole-scenario runs
def test_sim_shared_prefix_affinity_raises_hits_and_attainment():
    aware, blind, peers = run("slomesh"), run("slomesh-no-prefix"), run("prefix-only")
    assert aware.prefix_hit_rate > blind.prefix_hit_rate + 0.05
    assert peers.prefix_hit_rate > blind.prefix_hit_rate + 0.05
    assert aware.slo_attainment >= blind.slo_attainment
    assert 0.0 < blind.prefix_hit_rate < 1.0  # the engines cache even without affinity


@pytest.mark.slow
def test_sim_plain_scenarios_have_no_prefix_hits():
    spec = SCENARIOS.create("smoke")
    reqs = generate(spec.workload.model_copy(update={"requests": 100}), 0)
    out = summarize(Simulator(spec.cluster, STACKS.create("slomesh"), reqs).run())
    assert out.prefix_hit_rate == 0.0


def test_sim_only_shared_prefix_carries_prompt_prefixes():
    """Only conversation streams give requests a prompt prefix, and prefix-aware placement scores
    only requests with one (PrefixAffinity.choose): on every other scenario the flagship's
    prefix terms (the saving, the decode load weighed against it) never run."""
    with_prefixes = {
        name
        for name in SCENARIOS.names()
        if any(s.conversations is not None for s in SCENARIOS.create(name).workload.streams)
    }
    assert with_prefixes == {"shared-prefix"}
    spec = SCENARIOS.create("scorpio-mixed")
    reqs = generate(spec.workload.model_copy(update={"requests": 50}), 0)
    assert all(r.prefix is None for r in reqs)
