"""The live predictor's length hints on bench-agree's simulated requests
(slomesh/bench/agree/hints.py)."""

from __future__ import annotations

import statistics

import pytest

from shared.domain import Request
from slomesh.bench.agree.hints import plans_on_hints, with_live_hints
from slomesh.bench.agree.workload import (
    AgreeRequest,
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.stacks import STACKS

CLASSES = parse_classes("short:0.4:2:16:32-128,long:0.6:10:256:64-256")


def _trace(requests: int, seed: int) -> list[AgreeRequest]:
    spec = AgreeWorkloadSpec(classes=CLASSES, requests=requests, rate_rps=11.0)
    return generate_agree_workload(spec, seed)


def _prompt(a: AgreeRequest) -> str:
    return " ".join(f"w{(a.prompt_seed + k) % 97}" for k in range(a.prompt_tokens))


@pytest.mark.parametrize(
    ("stack", "hinted"),
    [("slo-odbs-live", True), ("scls-live", True), ("vllm-fcfs", False), ("slomesh", False)],
)
def test_which_stacks_plan_on_hints(stack: str, hinted: bool) -> None:
    assert plans_on_hints(STACKS.create(stack)) is hinted


def test_every_request_carries_the_predictors_hint_and_learning_moves_it() -> None:
    trace = _trace(60, 0)
    reqs = [a.to_request("tiny-llama") for a in trace]
    cold = with_live_hints(reqs, trace, [], _prompt, "learned", None)
    warm = with_live_hints(reqs, trace, [_trace(240, 1)], _prompt, "learned", None)
    for out in (cold, warm):
        assert [r.request_id for r in out] == [r.request_id for r in reqs]
        for r in out:
            assert r.length_hint is not None
            assert 0 <= r.length_hint.mean_tokens <= r.max_tokens
    # every output of the calibration trace ran to its max_tokens: learned, the long class's
    # hints move up toward 256 from the shipped model's guess

    def long_mean(out: list[Request]) -> float:
        means = [r.length_hint.mean_tokens for r in out if r.length_hint and r.max_tokens == 256]
        return float(statistics.median(means))

    assert long_mean(warm) > long_mean(cold)
