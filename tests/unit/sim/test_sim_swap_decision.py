"""A swap is the scheduler's decision (a ModelSwap `load`): the simulated engine finishes the
requests placed before it on the old model, then loads the new one, even with nothing of the new
model queued yet."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.replica.core.outputs import StepKind
from services.scheduler.core.decisions import Decisions
from shared.domain import SLO, Request
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.applier import SimApplier
from slomesh.sim.instance import SimInstance
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


@dataclass
class _Host:
    kicked: list[str] = field(default_factory=list)

    def kick(self, inst: SimInstance, now_s: float) -> None:
        self.kicked.append(inst.name)

    def reject(self, request: Request, reason: str, now_s: float) -> None:
        raise AssertionError(reason)

    def record_placement(self, request_id: str, instance: str) -> None:
        pass

    def too_large(self, request: Request, reason: str, instance: str, now_s: float) -> None:
        raise AssertionError(reason)


def _instance() -> SimInstance:
    sc = SCENARIOS.create("many-models")
    sim = Simulator(sc.cluster, STACKS.create("vllm-fcfs"), [])
    return sim.instances[0]


def _req(rid: str, model: str) -> Request:
    return Request(rid, model, 64, 4, 0.0, SLO(60.0), true_output_tokens=4)


def _a1_then_a_swap_to_c() -> tuple[SimInstance, SimApplier, Decisions]:
    """An engine on tiny-llama and decisions (not yet applied) that place a1 on it and order a
    swap to tiny-llama-c behind it."""
    inst = _instance()
    applier = SimApplier(_Host())
    applier.add_instance(inst)
    out = Decisions(0.0)
    out.place(_req("a1", "tiny-llama"), inst)
    out.swap(inst, "tiny-llama-c")
    return inst, applier, out


def _run(inst: SimInstance, now_s: float) -> list[tuple[StepKind, str | None]]:
    """Step the engine until it is idle; the kind of each step and the model it loaded."""
    steps = []
    for _ in range(200):
        plan = inst.core.schedule(now_s)
        if plan.kind is StepKind.IDLE:
            break
        steps.append((plan.kind, plan.load_model))
        inst.core.update(plan)
        now_s = plan.end_s
    return steps


def test_a_swap_decision_runs_the_old_models_requests_first_then_loads() -> None:
    inst = _instance()
    host = _Host()
    applier = SimApplier(host)
    applier.add_instance(inst)
    out = Decisions(0.0)
    out.place(_req("a1", "tiny-llama"), inst)
    out.swap(inst, "tiny-llama-c")
    assert out.swap_to(inst.name) == "tiny-llama-c"
    applier.apply(out.build())
    assert host.kicked == [inst.name, inst.name]
    steps = _run(inst, 0.0)
    loads = [m for k, m in steps if k is StepKind.LOAD_MODEL]
    assert loads == ["tiny-llama-c"]  # swapped with nothing of tiny-llama-c queued
    assert steps[-1] == (StepKind.LOAD_MODEL, "tiny-llama-c")  # after a1's steps
    assert inst.core.sequence("a1") is None or inst.core.sequence("a1").is_done
    assert inst.status().active_model == "tiny-llama-c" and inst.core.model_swaps == 1


def test_a_swap_to_the_active_model_is_nothing_to_do() -> None:
    inst = _instance()
    applier = SimApplier(_Host())
    applier.add_instance(inst)
    out = Decisions(0.0)
    out.swap(inst, "tiny-llama")
    applier.apply(out.build())
    assert _run(inst, 0.0) == [] and inst.core.model_swaps == 0


def test_an_order_back_to_the_active_model_cancels_one_not_carried_out() -> None:
    inst, applier, out = _a1_then_a_swap_to_c()
    applier.apply(out.build())
    back = Decisions(0.0)
    back.swap(inst, "tiny-llama")  # before a1 finished: the swap has not begun
    applier.apply(back.build())
    assert all(k is not StepKind.LOAD_MODEL for k, _ in _run(inst, 0.0))
    assert inst.core.model_swaps == 0


def test_a_third_models_head_goes_before_an_ordered_swap_and_status_names_the_load() -> None:
    inst, applier, out = _a1_then_a_swap_to_c()
    out.place(_req("b1", "tiny-llama-b"), inst)  # heads the line once a1 is done
    applier.apply(out.build())
    loads, during = [], []
    now_s = 0.0
    for _ in range(200):
        plan = inst.core.schedule(now_s)
        if plan.kind is StepKind.IDLE:
            break
        if plan.kind is StepKind.LOAD_MODEL:
            loads.append(plan.load_model)
            st = inst.status()
            during.append((st.active_model, st.swapping))
        inst.core.update(plan)
        now_s = plan.end_s
    assert loads == ["tiny-llama-b", "tiny-llama-c"]  # b1's model first, then the order
    assert during == [("tiny-llama-b", True), ("tiny-llama-c", True)]
    assert (inst.status().active_model, inst.status().swapping) == ("tiny-llama-c", False)
