"""Simulator runs of the SLO stacks: SCORPIO's engine guards and the batch-forming policies.

Small workloads only (each run takes well under a second); the scenario comparisons use a few
hundred requests of the scenario's own workload, enough to show the effect the papers report.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from services.replica.core.scorpio_planner import ScorpioPlanner
from services.replica.core.static import StaticPlanner
from services.scheduler.core.batching.policy import BatchingPolicy
from shared.domain import Request
from shared.metrics.records import RunResult
from shared.metrics.summary import StackSummary, summarize
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

STACKS_UNDER_TEST = [
    "scorpio",
    "scls",
    "slo-odbs",
    "fifo-batching",
    "scls-continuous",
    "slo-odbs-continuous",
]
BATCHING = ["scls", "slo-odbs", "fifo-batching", "scls-continuous", "slo-odbs-continuous"]


@cache
def scenario_run(scenario: str, stack: str, requests: int, seed: int = 0) -> RunResult:
    spec = SCENARIOS.create(scenario)
    reqs = generate(spec.workload.model_copy(update={"requests": requests}), seed)
    return Simulator(spec.cluster, STACKS.create(stack), reqs).run()


@cache
def scenario_summary(scenario: str, stack: str, requests: int) -> StackSummary:
    return summarize(scenario_run(scenario, stack, requests))


def check_records(run: RunResult, requests: list[Request]) -> None:
    """One record per request; served ones complete, rejected ones say why."""
    by_id = {r.request_id: r for r in requests}
    assert [rec.request_id for rec in run.records] == sorted(
        by_id, key=lambda i: (by_id[i].arrival_s, i)
    )
    for rec in run.records:
        req = by_id[rec.request_id]
        if rec.rejected:
            assert rec.reject_reason.strip(), rec.request_id
            assert rec.finish_s is None
            continue
        assert rec.finished, rec.request_id
        assert rec.output_tokens == req.output_tokens_to_generate, rec.request_id
        assert rec.first_token_s is not None and rec.finish_s is not None
        assert rec.arrival_s <= rec.first_token_s <= rec.finish_s
        assert rec.instance is not None


@pytest.mark.parametrize("stack", STACKS_UNDER_TEST)
@pytest.mark.parametrize("seed", [0, 1])
def test_stack_serves_every_request_to_its_true_length(sims, smoke, stack, seed):
    requests = sims.requests(seed, requests=120)
    run = sims.simulate(smoke.cluster, stack, requests)
    check_records(run, requests)
    finished = [r for r in run.records if r.finished]
    assert len(finished) >= len(requests) // 2  # the smoke load is light
    if stack in BATCHING:  # some outputs outlive one slice/batch and come back to the pool
        assert any(r.output_tokens > 128 for r in finished)


@pytest.mark.parametrize("stack", STACKS_UNDER_TEST)
def test_stack_same_seed_same_records(sims, smoke, stack):
    first = sims.simulate(smoke.cluster, stack, sims.requests(3, requests=120))
    again = sims.simulate(smoke.cluster, stack, sims.requests(3, requests=120))
    assert sims.signature(again) == sims.signature(first)
    assert again.instances == first.instances
    other = sims.simulate(smoke.cluster, stack, sims.requests(4, requests=120))
    assert sims.signature(other) != sims.signature(first)


@pytest.mark.parametrize(
    ("stack", "mode", "scorpio"),
    [
        ("scorpio", "continuous", True),
        ("vllm-fcfs", "continuous", False),
        ("scls", "static", False),
        ("slo-odbs", "static", False),
        ("fifo-batching", "static", False),
        ("scls-continuous", "continuous", False),  # the live mesh's slice mode
        ("slo-odbs-continuous", "continuous", False),
    ],
)
def test_stack_configures_its_engines(sims, smoke, stack, mode, scorpio):
    sim = Simulator(smoke.cluster, STACKS.create(stack), sims.requests(0, requests=5))
    for inst in sim.instances:
        assert inst.core.config.mode == mode
        assert (inst.core.config.scorpio is not None) == scorpio
        assert isinstance(inst.core.planner, ScorpioPlanner) == scorpio
        assert isinstance(inst.core.planner, StaticPlanner) == (mode == "static")
    assert isinstance(sim.global_policy, BatchingPolicy) == (stack in BATCHING)


@pytest.mark.slow  # whole scenario runs under overload
def test_scorpio_protects_admitted_tpot_and_beats_vllm_under_overload():
    scorpio = scenario_summary("scorpio-mixed", "scorpio", 400)
    fcfs = scenario_summary("scorpio-mixed", "vllm-fcfs", 400)
    assert scorpio.tpot_attainment_admitted >= 0.95
    assert scorpio.tpot_attainment_admitted > fcfs.tpot_attainment_admitted
    assert scorpio.goodput_rps > fcfs.goodput_rps
    assert scorpio.slo_attainment > fcfs.slo_attainment


@pytest.mark.slow  # whole scenario runs under overload
def test_scorpio_rejections_come_from_the_ttft_guard():
    """The stack's TTFT guard runs at admission (its one home, live and simulated)."""
    run = scenario_run("scorpio-mixed", "scorpio", 400)
    rejected = [r for r in run.records if r.rejected]
    assert rejected, "the overloaded scenario should make the guard reject something"
    for rec in rejected:
        assert rec.reject_reason.startswith("deadline-infeasible: predicted TTFT")
        assert f"'{rec.class_name}' TTFT SLO" in rec.reject_reason
        assert rec.first_token_s is None and rec.output_tokens == 0
    fcfs = scenario_run("scorpio-mixed", "vllm-fcfs", 400)
    assert not any(r.rejected for r in fcfs.records)  # vLLM serves everything, late


@pytest.mark.slow  # whole scenario runs under overload
def test_scorpio_records_are_complete_under_overload():
    spec = SCENARIOS.create("scorpio-mixed")
    requests = generate(spec.workload.model_copy(update={"requests": 400}), 0)
    check_records(scenario_run("scorpio-mixed", "scorpio", 400), requests)


@pytest.mark.slow  # whole scenario runs under overload
def test_scls_beats_sls_on_throughput_and_balance():
    scls = scenario_summary("scls-static", "scls", 300)
    sls = scenario_summary("scls-static", "sls", 300)
    assert scls.throughput_rps > sls.throughput_rps
    assert scls.load_imbalance_s < sls.load_imbalance_s
    for s in (scls, sls):  # the lax SLO: nobody is turned away
        assert s.rejected == 0


@pytest.mark.parametrize("stack", BATCHING)
def test_batching_stack_rejects_a_model_no_instance_serves(sims, smoke, stack):
    requests = sims.requests(0, requests=40)
    foreign = {r.request_id for r in requests[::10]}
    requests = [
        dataclasses.replace(r, model="no-such-model") if r.request_id in foreign else r
        for r in requests
    ]
    run = sims.simulate(smoke.cluster, stack, requests)
    check_records(run, requests)
    rejected = {r.request_id: r.reject_reason for r in run.records if r.rejected}
    assert set(rejected) == foreign
    for reason in rejected.values():
        assert "'no-such-model'" in reason
