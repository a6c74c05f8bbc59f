"""A simulated run is a pure function of (config, seed): the same small overloaded qlm-wa run,
twice and once with every ILP solve seeing a clock far too slow for the live wall-clock budget,
gives identical per-request records (the simulator bounds the solver by work, not time)."""

from __future__ import annotations

import itertools

import pytest

import services.scheduler.core.qlm.solvers.registry as solver_registry
from services.scheduler.core.qlm.solvers.problem import Plan
from shared.metrics.records import RequestRecord
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

pytestmark = pytest.mark.slow  # whole simulator runs (~1 s each)


def _run(stack: str) -> list[RequestRecord]:
    sc = SCENARIOS.create("qlm-wa")
    workload = sc.workload.model_copy(update={"requests": 150}).with_total_rate(16.0)
    return Simulator(sc.cluster, STACKS.create(stack), generate(workload, 0)).run().records


@pytest.mark.parametrize("stack", ["qlm", "slomesh"])
def test_sim_same_run_twice_and_with_a_slowed_solver_gives_identical_records(stack, monkeypatch):
    plans: list[Plan] = []
    real = solver_registry.ilp_plan

    def counted(*args, **kwargs):
        plans.append(real(*args, **kwargs))
        return plans[-1]

    monkeypatch.setattr(solver_registry, "ilp_plan", counted)
    first = _run(stack)
    second = _run(stack)
    improved = sum(p.status != "fallback" for p in plans)

    def slowed(groups, queues, time_limit_s, mip_rel_gap, warm, timer, **kwargs):
        ticks = itertools.count()  # every clock read 10 s later: a hopelessly loaded machine
        return real(
            groups, queues, time_limit_s, mip_rel_gap, warm, lambda: 10.0 * next(ticks), **kwargs
        )

    monkeypatch.setattr(solver_registry, "ilp_plan", slowed)
    slow = _run(stack)
    if stack == "qlm":  # the ILP really decided something in these runs
        assert improved > 0
    assert second == first
    assert slow == first
