"""The peers' stacks in the simulator: they run, prefix affinity raises hits, flow control
holds work and the latency-SLO admitter turns away only sheddable work."""

from __future__ import annotations

from functools import cache

import pytest

from shared.metrics.summary import StackSummary, summarize
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

pytestmark = pytest.mark.slow  # whole-scenario runs (about a second each)


@cache
def run(scenario: str, stack: str, requests: int, rate: float) -> StackSummary:
    spec = SCENARIOS.create(scenario)
    wl = spec.workload.with_total_rate(rate).model_copy(update={"requests": requests})
    return summarize(Simulator(spec.cluster, STACKS.create(stack), generate(wl, 0)).run())


def test_sim_peer_prefix_routers_raise_hits():
    plain = run("shared-prefix", "ray-serve-llm", 600, 12.0)
    prefix = run("shared-prefix", "ray-serve-llm-prefix", 600, 12.0)
    llm_d = run("shared-prefix", "llm-d", 600, 12.0)
    assert prefix.prefix_hit_rate > plain.prefix_hit_rate + 0.05
    assert llm_d.prefix_hit_rate > plain.prefix_hit_rate + 0.05


@pytest.mark.parametrize("stack", ["ray-serve-llm", "ray-serve-llm-prefix", "llm-d"])
def test_sim_peer_stacks_serve_every_request(stack):
    out = run("smoke", stack, 200, 20.0)
    assert out.requests == 200 and out.unfinished == 0
    assert out.slo_attainment > 0.5
