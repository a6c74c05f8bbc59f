"""The early-stopping probe counts a miss once it is certain: past the TTFT deadline with no
first token. Its verdict and bound must match the full run's records."""

from __future__ import annotations

import pytest

from shared.domain import Request
from shared.metrics.summary import summarize
from shared.workloads import generate
from slomesh.bench.early_stop import Criterion, Decided, EarlyStopSimulator
from slomesh.bench.scenarios import SCENARIOS, ScenarioSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


def _requests(rate: float, n: int = 200) -> tuple[ScenarioSpec, list[Request]]:
    sc = SCENARIOS.create("smoke")  # with a 0.5 s TTFT SLO, so a queue soon passes it
    streams = [s.model_copy(update={"slo_class": "tight"}) for s in sc.workload.streams]
    workload = sc.workload.model_copy(update={"requests": n, "streams": streams})
    workload = workload.with_total_rate(rate)
    return sc, generate(workload, 0)


@pytest.mark.parametrize("criterion", ["overall", "every-class"])
def test_misses_count_at_the_deadline_and_the_verdict_holds(criterion: Criterion) -> None:
    # far past capacity on FCFS engines: nothing is rejected, queued requests pass their
    # deadline long before they finish
    sc, reqs = _requests(200.0)
    sim = EarlyStopSimulator(sc.cluster, STACKS.create("vllm-fcfs"), reqs, 0.9, criterion)
    with pytest.raises(Decided) as stop:
        sim.run()
    assert sim._counted_late, "no miss was counted at its deadline"
    full = summarize(Simulator(sc.cluster, STACKS.create("vllm-fcfs"), reqs).run())
    worst = (
        full.slo_attainment if criterion == "overall" else min(full.attainment_by_class.values())
    )
    assert worst < 0.9
    assert stop.value.attainment < 0.9
    # the bound is an upper bound on the full run's figure (misses counted are real misses)
    assert stop.value.attainment >= worst - 1e-9


def test_counted_misses_are_misses_in_the_full_run() -> None:
    sc, reqs = _requests(200.0)
    stack = STACKS.create("vllm-fcfs")
    sim = EarlyStopSimulator(sc.cluster, stack, reqs, 0.9)
    with pytest.raises(Decided):
        sim.run()
    full = Simulator(sc.cluster, STACKS.create("vllm-fcfs"), reqs).run()
    met = {r.request_id: r.slo_met for r in full.records}
    assert sim._counted_late
    assert not any(met[rid] for rid in sim._counted_late)


def test_a_request_with_its_first_token_in_time_is_not_counted() -> None:
    # well under capacity: every deadline passes after the first token, none is counted
    sc, reqs = _requests(2.0, n=60)
    sim = EarlyStopSimulator(sc.cluster, STACKS.create("vllm-fcfs"), reqs, 0.9)
    with pytest.raises(Decided) as stop:
        sim.run()
    assert stop.value.attainment >= 0.9
    assert not sim._counted_late
