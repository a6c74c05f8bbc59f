"""bench-agree's pure parts: the seeded workload, exact-length prompts, the live-vs-sim
comparison and ranking agreement, the RWT score, and the profiled simulator on a tiny trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.domain import SLO, Request
from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.compare import (
    ALL,
    attainment,
    rankings_agree,
    rwt_score,
    side_by_side,
)
from slomesh.bench.agree.prompts import PromptBuilder, exact_prompt, single_token_words
from slomesh.bench.agree.sim import simulate
from slomesh.bench.agree.workload import (
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.stacks import STACKS

CLASSES = "short:0.4:2.0:16:32-128,long:0.6:3600:128:64-256"
PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"


def spec(requests: int = 200, rate: float = 8.0) -> AgreeWorkloadSpec:
    return AgreeWorkloadSpec(classes=parse_classes(CLASSES), requests=requests, rate_rps=rate)


def test_workload_is_deterministic_in_seed_and_follows_the_classes() -> None:
    a, b, c = (generate_agree_workload(spec(), s) for s in (3, 3, 4))
    assert a == b
    assert a != c
    assert [r.arrival_s for r in a] == sorted(r.arrival_s for r in a)
    assert a[0].arrival_s == 0.0
    for r in a:
        lo, hi, out = (32, 128, 16) if r.class_name == "short" else (64, 256, 128)
        assert lo <= r.prompt_tokens <= hi and r.output_tokens == out
    shorts = sum(r.class_name == "short" for r in a) / len(a)
    assert 0.3 < shorts < 0.5
    assert len({r.prompt_seed for r in a}) == len(a)
    rate = (len(a) - 1) / a[-1].arrival_s
    assert 6.0 < rate < 10.0


def test_domain_request_forces_the_output_length() -> None:
    r = generate_agree_workload(spec(5), 0)[0]
    d = r.to_request("tiny-llama", arrival_s=12.5)
    assert (d.max_tokens, d.true_output_tokens, d.input_tokens) == (
        r.output_tokens,
        r.output_tokens,
        r.prompt_tokens,
    )
    assert d.arrival_s == 12.5 and d.slo.class_name == r.class_name


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("short:1:2:16", "must be name:weight"),
        ("short:0:2:16:32-64", "weight"),
        ("short:1:2:16:64-32", "prompt_tokens_max (32) must be >= prompt_tokens_min (64)"),
        ("a:1:2:16:32-64,a:1:2:16:32-64", "unique"),
        ("", "no class"),
    ],
)
def test_bad_classes_name_the_rule(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="classes") as err:
        AgreeWorkloadSpec(classes=parse_classes(text), requests=1, rate_rps=1.0)
    assert fragment in str(err.value)


def _toy_encode(text: str) -> list[int]:
    """BOS + one id per word, except 'xy' (two) and 'ab' (two alone; merges are per word)."""
    ids = [0]
    for w in text.split():
        ids += [1, 1] if w in ("xy", "ab") else [1]
    return ids


@pytest.mark.parametrize("tokens", [2, 3, 17, 500])
def test_exact_prompts_have_the_asked_token_count(tokens: int) -> None:
    builder = PromptBuilder(_toy_encode, ["hello", "xy", "ka", "ab", "lo"])
    assert builder.words == ["hello", "ka", "lo"]
    assert builder.special_tokens == 1
    text = builder.build(tokens, seed=7)
    assert len(_toy_encode(text)) == tokens
    assert text == builder.build(tokens, seed=7)


def test_exact_prompt_rejects_lengths_below_the_special_tokens() -> None:
    assert single_token_words(_toy_encode, ["xy"]) == []
    with pytest.raises(ValueError, match="tokens must be > 1"):
        exact_prompt(["a"], 1, 1, 0)


def rec(policy_cls: str, met: bool, rejected: bool = False) -> RequestRecord:
    r = Request(
        request_id=f"r{id(object())}",
        model="m",
        input_tokens=10,
        max_tokens=4,
        arrival_s=0.0,
        slo=SLO(ttft_deadline_s=1.0, class_name=policy_cls),
    )
    if rejected:
        return RequestRecord.from_request(r, None, None, None, 0, reject_reason="full")
    first = 0.5 if met else 2.0
    return RequestRecord.from_request(r, "i0", first, first + 0.1, 4)


def test_attainment_and_side_by_side_rows() -> None:
    live = {"fcfs": [rec("a", True), rec("a", False), rec("b", True, rejected=True)]}
    sim = {"fcfs": [rec("a", True), rec("a", True), rec("b", True)], "edf": []}
    att = attainment(live["fcfs"])
    assert att[ALL] == (3, pytest.approx(100 / 3))
    assert att["a"] == (2, 50.0) and att["b"] == (1, 0.0)
    rows = side_by_side(live, sim)
    assert [(r.stack, r.class_name) for r in rows] == [("fcfs", ALL), ("fcfs", "a"), ("fcfs", "b")]
    assert rows[0].diff_points == pytest.approx(100 / 3 - 100)
    assert rows[2].diff_points == -100.0


@pytest.mark.parametrize(
    ("live", "sim", "tie", "agree"),
    [
        ({"a": 90, "b": 50, "c": 70}, {"a": 95, "b": 40, "c": 80}, 0.0, True),
        ({"a": 90, "b": 50}, {"a": 40, "b": 50}, 0.0, False),
        ({"a": 99.5, "b": 100.0}, {"a": 100.0, "b": 99.6}, 1.0, True),  # tied on both sides
        ({"a": 99.5, "b": 100.0}, {"a": 100.0, "b": 99.6}, 0.0, False),
        ({"a": 90, "b": 89.5}, {"a": 90, "b": 80}, 1.0, False),  # tied live, ordered in sim
    ],
)
def test_rankings_agree(
    live: dict[str, float], sim: dict[str, float], tie: float, agree: bool
) -> None:
    assert rankings_agree(live, sim, tie) is agree


def test_rankings_need_the_same_stacks() -> None:
    with pytest.raises(ValueError, match="stacks differ"):
        rankings_agree({"a": 1.0}, {"b": 1.0})


def test_rwt_score_keeps_deep_queues_only() -> None:
    waits = [
        ScoredWait("r1", 1.0, 2.0, 3.0, 1.0, 4),
        ScoredWait("r2", 2.0, 3.0, 3.0, 2.0, 5),
        ScoredWait("r3", 3.0, 3.5, 5.0, 4.0, 6),
        ScoredWait("r4", 9.0, 9.0, 9.0, 0.0, 1),  # shallow: not scored
    ]
    s = rwt_score(waits, min_groups=4)
    assert s.pairs == 3
    # measured 1, 2, 4 (mean 7/3): SS_tot = 14/3, SS_res = 1 -> R² = 1 - 3/14
    assert s.r2_point == pytest.approx(1 - 3 / 14)
    assert s.coverage_quantile == pytest.approx(2 / 3)
    assert s.coverage_widened == 1.0
    assert s.mean_abs_error_s == pytest.approx(1 / 3)
    assert rwt_score(waits, min_groups=7).pairs == 0


def test_profiled_simulator_serves_the_trace_on_the_cpu_profile() -> None:
    profile = load_profiles(PROFILE)[0]
    classes = parse_classes("short:0.4:0.2:16:32-128,long:0.6:3600:256:64-256")
    trace = generate_agree_workload(AgreeWorkloadSpec(classes=classes, requests=60, rate_rps=40), 0)
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    runs = {
        p: simulate(
            profile, 2, engine, STACKS.create(p), [r.to_request(profile.model) for r in trace]
        )
        for p in ("vllm-fcfs", "edf", "qlm")
    }
    for run in runs.values():
        assert len(run.records) == 60
        # the live scheduler's admission runs in the simulator: a queued request whose TTFT
        # deadline can no longer be met is answered with a rejection, as live
        served = [(r, t) for r, t in zip(run.records, trace, strict=True) if not r.rejected]
        assert len(served) >= 45
        assert {r.instance for r, _ in served} == {"i0-cpu", "i1-cpu"}
        assert all(r.output_tokens == t.output_tokens for r, t in served)
    assert runs["qlm"].scored_waits and not runs["edf"].scored_waits
    fcfs, edf = (attainment(runs[p].records)["short"][1] for p in ("vllm-fcfs", "edf"))
    assert edf > fcfs  # overloaded: EDF serves the 0.2 s class ahead of the long work


@pytest.mark.slow
def test_qlm_widening_acts_on_the_recent_error() -> None:
    """Widened estimates are never below the model's quantile and, where the estimator has been
    under-predicting, above it."""
    profile = load_profiles(PROFILE)[0]
    classes = parse_classes("short:0.4:3:16:32-128,long:0.6:3600:256:64-256")
    trace = generate_agree_workload(
        AgreeWorkloadSpec(classes=classes, requests=150, rate_rps=20), 0
    )
    stack = STACKS.create("qlm").with_policy_options(
        {"rwt_error": {"widen": True, "min_samples": 5}, "grouping": {"avg_batch_size": 2}}
    )
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    run = simulate(profile, 2, engine, stack, [r.to_request(profile.model) for r in trace])
    scored = run.scored_waits
    assert len(scored) > 20
    assert all(s.widened_s >= s.quantile_s for s in scored)
    assert any(s.widened_s > s.quantile_s for s in scored)
    assert rwt_score(scored, 0).coverage_widened >= rwt_score(scored, 0).coverage_quantile
