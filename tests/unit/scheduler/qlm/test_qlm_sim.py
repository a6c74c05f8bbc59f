"""`qlm` and its ablations in the discrete-event simulator: every request accounted for, and the
switched-off operation really off (small multi-model and single-model runs)."""

from __future__ import annotations

import pytest

from services.scheduler.core.qlm.policy import QLMPolicy
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

pytestmark = pytest.mark.slow  # whole simulator scenario runs


def _run(scenario: str, stack: str, requests: int, rate: float | None = None):
    sc = SCENARIOS.create(scenario)
    workload = sc.workload.model_copy(update={"requests": requests})
    if rate is not None:
        workload = workload.with_total_rate(rate)
    sim = Simulator(sc.cluster, STACKS.create(stack), generate(workload, 0))
    result = sim.run()
    assert isinstance(sim.global_policy, QLMPolicy)
    return sim, result


@pytest.mark.parametrize(
    "stack",
    ["qlm", "qlm-no-pull", "qlm-no-evict", "qlm-no-swap", "qlm-no-balance", "qlm-true-lengths"],
)
def test_qlm_variants_account_for_every_request(stack):
    sim, result = _run("qlm-wa", stack, 300, rate=8.0)
    assert len(result.records) == 300
    assert all(r.finished or r.rejected for r in result.records)
    policy = sim.global_policy
    assert len(policy.grouper) == 0  # the global queue drained
    if stack in ("qlm-no-evict", "qlm-no-pull"):  # no pulling: nothing to evict for either
        assert policy.ops.evictions == 0


def test_qlm_overload_makes_it_replan_and_reorder():
    sim, _ = _run("qlm-wa", "qlm", 300, rate=16.0)
    assert sim.global_policy.stats.replans > 0
    assert sim.global_policy.stats.reordered_groups > 0


def test_qlm_groups_models_so_it_swaps_less_than_edf():
    _, grouped = _run("qlm-wb", "qlm", 200, rate=2.0)
    sc = SCENARIOS.create("qlm-wb")
    workload = sc.workload.model_copy(update={"requests": 200}).with_total_rate(2.0)
    edf = Simulator(sc.cluster, STACKS.create("edf"), generate(workload, 0)).run()
    swaps = sum(i.swaps for i in grouped.instances)
    assert swaps < 0.8 * sum(i.swaps for i in edf.instances)
