"""QLM's swap operation as a decision: when an instance swaps to a queued group's model.

With `defer`, a group of another model waits until it is due when the swap's round trip is
dear next to the planned model's tightest SLO; then the policy decides the swap (a ModelSwap
`load`) once the engine holds no waiting request of the old model. On many-models the flagship
so keeps its models in place and serves the third one in one swap."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from services.scheduler.core.decisions import Decisions
from services.scheduler.core.qlm.clustering import OutputEstimate
from services.scheduler.core.qlm.groups import Grouper, RequestGroup
from services.scheduler.core.qlm.swap_plan import SwapPlan, SwapPlanConfig
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.engine import EngineStatus
from shared.workloads.generator import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS
from tests.unit.scheduler.conftest import make_profile

LOAD_S = 30.0


@dataclass
class _Inst:
    """An instance on model A whose swaps take LOAD_S each way."""

    name: str = "i0"
    active: str = "A"
    waiting: int = 0

    def status(self) -> EngineStatus:
        return EngineStatus(self.active, self.waiting, 0, 0, 0, 100, 0, 0)

    def load_time_s(self, model: str) -> float:
        return 0.0 if model == self.active else LOAD_S

    def serves(self, model: str) -> bool:
        return True

    def profile(self, model: str) -> HardwareProfile:
        return make_profile(model, weight_bytes=int(LOAD_S * 1e9), swap_bytes_s=1e9)


def _group(model: str, deadline_s: float, rid: str = "c1") -> RequestGroup:
    request = Request(rid, model, 64, 32, 0.0, SLO(deadline_s))
    return Grouper().assign(request, OutputEstimate(32.0, 8.0, 64), 0.0)


def _plan(lead_s: float = 40.0) -> SwapPlan:
    plan = SwapPlan(SwapPlanConfig(defer=True, margin_s=5.0), lambda inst, group: lead_s)
    plan.observe(Request("a", "A", 64, 32, 0.0, SLO(20.0)))  # A serves a 20 s class
    return plan


def test_a_dear_swap_waits_until_its_group_is_due_then_is_decided() -> None:
    inst, plan = _Inst(), _plan()
    group = _group("C", 3600.0)
    assert plan.servable(inst, [group], now_s=0.0) == []  # 3600 s of slack: held back
    due_at = 3600.0 - 40.0 - 5.0
    assert plan.servable(inst, [group], now_s=due_at - 1) == []
    assert plan.servable(inst, [group], now_s=due_at) == [group]
    out = Decisions(due_at)
    assert plan.ready(inst, group, out)
    (swap,) = out.build().swaps
    assert (swap.instance, swap.model, swap.kind) == ("i0", "C", "load")
    assert plan.planned(inst) == "C" and plan.swaps == 1
    assert plan.ready(inst, _group("C", 3600.0, "c2"), Decisions(due_at))  # no second swap
    assert plan.swaps == 1


def test_the_swap_waits_for_the_old_models_waiting_requests() -> None:
    inst, plan = _Inst(waiting=2), _plan()
    out = Decisions(0.0)
    assert not plan.ready(inst, _group("C", 10.0), out)
    assert out.build().swaps == () and plan.planned(inst) == "A"
    inst.waiting = 0
    assert plan.ready(inst, _group("C", 10.0), out)
    inst.active = "C"  # the engine swapped: nothing planned beyond its active model
    assert plan.planned(inst) == "C"


def test_a_cheap_swap_is_taken_at_once_and_defer_off_never_holds_back() -> None:
    inst, plan = _Inst(), _plan()
    plan.observe(Request("a2", "A", 64, 32, 0.0, SLO(20.0)))
    plan._tightest_s["A"] = 1000.0  # A's tightest SLO far above the 60 s round trip
    group = _group("C", 3600.0)
    assert plan.servable(inst, [group], 0.0) == [group]
    off = SwapPlan(SwapPlanConfig(), lambda inst, group: 40.0)
    assert off.servable(inst, [group], 0.0) == [group]


def _swaps_and_met(stack: str) -> tuple[int, Counter[str], Counter[str]]:
    sc = SCENARIOS.create("many-models")
    workload = sc.workload.model_copy(update={"requests": 240}).with_total_rate(2.0)
    result = Simulator(sc.cluster, STACKS.create(stack), generate(workload, 0)).run()
    met = Counter(r.class_name for r in result.records if r.slo_met)
    total = Counter(r.class_name for r in result.records)
    return sum(i.swaps for i in result.instances), met, total


def test_the_flagship_keeps_models_in_place_and_batches_the_third_ones_swap() -> None:
    swaps, met, total = _swaps_and_met("slomesh")
    assert swaps <= 2  # to tiny-llama-c once and back
    assert met == total  # every class met, the interactive one included
    mux_swaps, mux_met, _ = _swaps_and_met("serve-multiplex")
    assert mux_swaps > 10 * swaps
    assert mux_met["interactive"] < total["interactive"]


def _two_instances(keep: bool) -> tuple[SwapPlan, _Inst, _Inst]:
    i0, i1 = _Inst("i0", "A"), _Inst("i1", "B")
    cfg = SwapPlanConfig(defer=True, keep_sole_models=keep)
    plan = SwapPlan(cfg, lambda inst, group: 40.0, {"i0": i0, "i1": i1})
    plan.observe(Request("a", "A", 64, 32, 0.0, SLO(20.0)))  # A: 20 s, under the 60 s round trip
    plan.observe(Request("b", "B", 64, 32, 0.0, SLO(300.0)))  # B: 300 s, above it
    return plan, i0, i1


def test_keep_sole_models_places_a_swap_where_it_displaces_no_tight_model() -> None:
    plan, i0, i1 = _two_instances(keep=True)
    group = _group("C", 600.0)
    assert plan.displaces(i0, group) and not plan.displaces(i1, group)
    assert plan.hosts(group) == ["i1"]
    assert plan.hosts(_group("A", 600.0)) == ["i0", "i1"]  # A's own group displaces nothing
    i1.active = "A"  # another instance serves A too: i0 may leave it
    assert not plan.displaces(i0, group)
    plan._tightest_s["B"] = 20.0  # every instance would displace a tight model: all may host
    i1.active = "B"
    assert plan.hosts(group) == ["i0", "i1"]
    off, _, _ = _two_instances(keep=False)
    assert off.hosts(group) == ["i0", "i1"]


def test_learn_requests_treats_a_model_seen_only_in_a_loose_class_as_tight_until_it_is_known() -> (
    None
):
    group = _group("C", 600.0)

    def plan_after(learn: int, b_requests: int) -> tuple[SwapPlan, _Inst]:
        i0, i1 = _Inst("i0", "A"), _Inst("i1", "B")
        cfg = SwapPlanConfig(defer=True, keep_sole_models=True, learn_requests=learn)
        plan = SwapPlan(cfg, lambda inst, group: 40.0, {"i0": i0, "i1": i1})
        plan.observe(Request("a", "A", 64, 32, 0.0, SLO(20.0)))
        for k in range(b_requests):  # B seen only in its 300 s class so far
            plan.observe(Request(f"b{k}", "B", 64, 32, 0.0, SLO(300.0)))
        return plan, i1

    plan, i1 = plan_after(learn=0, b_requests=1)
    assert plan.tightest_s("B", 0.0) == 300.0
    assert not plan.displaces(i1, group) and plan.servable(i1, [group], 0.0) == [group]
    plan, i1 = plan_after(learn=3, b_requests=2)  # B not known yet: A's 20 s counts for it
    assert plan.tightest_s("B", 0.0) == 20.0
    assert plan.displaces(i1, group) and plan.servable(i1, [group], 0.0) == []
    plan, i1 = plan_after(learn=3, b_requests=3)  # known: its own 300 s
    assert plan.tightest_s("B", 0.0) == 300.0 and not plan.displaces(i1, group)
    assert plan.tightest_s("unseen", 0.0) == 0.0  # unseen: the caller's default, as before
