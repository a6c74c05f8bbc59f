"""many-models in the simulator: three models on two instances that swap. Serve's multiplexing
moves models to where requests go, a static placement never moves one, and nothing is lost."""

from __future__ import annotations

from collections import defaultdict

import pytest

from shared.workloads.generator import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


@pytest.fixture(scope="module")
def scenario():
    sc = SCENARIOS.create("many-models")
    workload = sc.workload.model_copy(update={"requests": 240}).with_total_rate(6.0)
    return sc.model_copy(update={"workload": workload})


def run(scenario, stack):
    return Simulator(scenario.cluster, STACKS.create(stack), generate(scenario.workload, 0)).run()


def placements(result):
    where = defaultdict(set)
    for r in result.records:
        if r.instance is not None:
            where[r.model].add(r.instance)
    return where


def test_many_models_instances_run_the_measured_cpu_profiles(scenario):
    sim = Simulator(scenario.cluster, STACKS.create("vllm-fcfs"), [])
    for inst in sim.instances:
        assert sorted(inst.core.tiers.profiles) == ["tiny-llama", "tiny-llama-b", "tiny-llama-c"]
        p = inst.profile("tiny-llama-c")
        assert p.gpu == "cpu" and "swap measured" in p.source
        assert inst.load_time_s("tiny-llama-c") > 1.0  # an engine restart, seconds
    assert [i.status().active_model for i in sim.instances] == ["tiny-llama", "tiny-llama-b"]


@pytest.mark.parametrize("stack", ["serve-multiplex", "vllm-fcfs-static", "slomesh"])
def test_many_models_serves_every_request_on_every_stack(scenario, stack):
    result = run(scenario, stack)
    assert len(result.records) == 240
    unserved = [r for r in result.records if r.finish_s is None and not r.rejected]
    assert unserved == []


def test_static_placement_never_moves_a_model(scenario):
    where = placements(run(scenario, "vllm-fcfs-static"))
    assert all(len(v) == 1 for v in where.values()), dict(where)
    assert len(set().union(*where.values())) == 2  # both instances used


def test_serve_multiplex_moves_models_to_the_requests(scenario):
    result = run(scenario, "serve-multiplex")
    assert sum(s.swaps for s in result.instances) > 0
    assert len(placements(result)["tiny-llama-c"]) >= 1
