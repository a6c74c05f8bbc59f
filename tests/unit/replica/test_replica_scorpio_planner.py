"""SCORPIO's guards inside the simulated continuous engine (ScorpioPlanner), driven by hand.

Credit batching decides which decodes run each step, VBS admission which waiting heads join the
running batch, the TTFT guard which waiting requests are rejected early (plan.rejected).
"""

from __future__ import annotations

import pytest

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind, StepPlan
from services.replica.core.scorpio.tpot_model import DecodeTPOTModel, PrefillInterferenceTPOTModel
from services.replica.core.scorpio_planner import ScorpioPlanner
from shared.domain import SLO, DecodeCoeffs, Request
from shared.domain.scorpio import ScorpioConfig

# tau_decode(l, N) = 0.02·N + 0.01: with STP 0.1 s, 1.3·tau <= 0.099 holds for N <= 3 only
FLAT_DECODE = DecodeCoeffs(0.0, 0.02, 0.0, 0.01)


def req(
    rid: str,
    input_tokens: int,
    output_tokens: int,
    *,
    tpot: float | None = None,
    ttft: float = 10.0,
    arrival: float = 0.0,
) -> Request:
    return Request(
        request_id=rid,
        model="m",
        input_tokens=input_tokens,
        max_tokens=output_tokens,
        arrival_s=arrival,
        slo=SLO(ttft_deadline_s=ttft, tpot_target_s=tpot),
        true_output_tokens=output_tokens,
    )


def scorpio_core(h, capacity: int = 8192, decode: DecodeCoeffs | None = None, **knobs):
    profile = h.profile(capacity) if decode is None else h.profile(capacity, decode=decode)
    return h.core(profiles={"m": profile}, scorpio=ScorpioConfig(**knobs))


def step(core: SimEngineCore, t: float) -> tuple[StepPlan, list[str], list[str]]:
    """One schedule/update round: the plan, the ids scheduled and the ids that finished."""
    plan = core.schedule(t)
    ids = [c.seq.request_id for c in plan.chunks]
    finished = [s.request_id for s in core.update(plan).finished]
    return plan, ids, finished


def check_counters(h, core: SimEngineCore) -> None:
    h.check(core)
    live = core.planner.state.seqs.values()
    assert core.status().pending_prefill_tokens == sum(s.uncomputed_tokens for s in live)


def test_engine_with_scorpio_config_gets_scorpio_planner(h):
    assert isinstance(scorpio_core(h).planner, ScorpioPlanner)
    assert not isinstance(h.core().planner, ScorpioPlanner)


# ---- credit batching -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("credit", "steps", "tight_tokens", "loose_tokens"),
    [(True, 10, 10, 5), (True, 7, 7, 3), (False, 10, 10, 10)],
)
def test_credit_batching_loose_request_decodes_every_second_step(
    h, credit, steps, tight_tokens, loose_tokens
):
    core = scorpio_core(h, credit_batching=credit, vbs_admission=False, ttft_guard=False)
    core.add_request(req("tight", 10, 100, tpot=0.02), 0.0)
    core.add_request(req("loose", 10, 100, tpot=0.04), 0.0)
    plan, ids, _ = step(core, 0.0)  # both prefill and get their first token
    assert sorted(ids) == ["loose", "tight"]
    t = plan.end_s
    tokens = {"tight": 0, "loose": 0}
    for _ in range(steps):
        plan, ids, _ = step(core, t)
        assert plan.kind is StepKind.EXECUTE
        for rid in ids:
            tokens[rid] += 1
        t = plan.end_s
        h.check(core)
    assert tokens == {"tight": tight_tokens, "loose": loose_tokens}
    assert core.planner.state.seqs["tight"].num_output_tokens == 1 + tight_tokens


# ---- VBS admission (the TPOT guard) ----------------------------------------------------------
@pytest.mark.parametrize(
    ("vbs", "stps", "first_batch"),
    [
        (True, [0.1, 0.1, 0.1, 0.1], 3),  # 1.3·tau(4) = 0.117 > 0.099
        (False, [0.1, 0.1, 0.1, 0.1], 4),
        (True, [0.01, 0.01], 1),  # over the limit even alone: an idle engine takes its head
        (False, [0.01, 0.01], 2),
        (True, [0.1, 0.1, 0.05], 2),  # a tighter newcomer lowers the limit for everyone
    ],
)
def test_vbs_admission_holds_back_heads_until_a_request_finishes(h, vbs, stps, first_batch):
    core = scorpio_core(
        h, decode=FLAT_DECODE, vbs_admission=vbs, ttft_guard=False, prefill_interference=False
    )
    outputs = [3] + [12] * (len(stps) - 1)  # r0 finishes first
    for k, (stp, out) in enumerate(zip(stps, outputs, strict=True)):
        core.add_request(req(f"r{k}", 16, out, tpot=stp), 0.0)
    t = 0.0
    first_step: dict[str, int] = {}
    finishes: dict[str, int] = {}
    for n in range(500):
        if not core.has_work:
            break
        plan, ids, finished = step(core, t)
        for rid in ids:
            first_step.setdefault(rid, n)
        finishes.update(dict.fromkeys(finished, n))
        t = plan.end_s
        check_counters(h, core)
    assert sorted(finishes) == [f"r{k}" for k in range(len(stps))]  # everyone served
    assert sorted(r for r, n in first_step.items() if n == 0) == [
        f"r{k}" for k in range(first_batch)
    ]
    for k in range(first_batch, len(stps)):  # held back: admitted right after a finish
        admitted = first_step[f"r{k}"]
        assert admitted > 0
        assert admitted - 1 in finishes.values()
        assert admitted - 1 >= finishes["r0"]


@pytest.mark.parametrize(
    ("free", "stps", "first_batch"),
    [
        # no TPOT SLO: each counts at default_tpot_s 0.2 s, 1.3·tau(N) <= 0.198 for N <= 7
        (False, [None] * 9, 7),
        (True, [None] * 9, 9),  # nothing to guard: the batch is not capped
        # one TPOT SLO (0.1 s) in the batch: guarded again, the others at TRP 0.5,
        # VBS = 1 + 0.5·(N - 1) <= 3.31 for N <= 5
        (True, [0.1] + [None] * 8, 5),
        (True, [None] * 6 + [0.1], 6),  # the tight newcomer would make VBS 4: held back
    ],
)
def test_vbs_untargeted_free_guards_only_tpot_slos(h, free, stps, first_batch):
    core = scorpio_core(
        h,
        decode=FLAT_DECODE,
        ttft_guard=False,
        prefill_interference=False,
        credit_batching=False,
        vbs_untargeted_free=free,
    )
    for k, stp in enumerate(stps):
        core.add_request(req(f"r{k}", 16, 12, tpot=stp), 0.0)
    _, ids, _ = step(core, 0.0)
    assert sorted(ids) == sorted(f"r{k}" for k in range(first_batch))


def test_vbs_admission_counts_running_requests_at_plan_time(h):
    core = scorpio_core(h, decode=FLAT_DECODE, ttft_guard=False, prefill_interference=False)
    for k in range(3):
        core.add_request(req(f"r{k}", 16, 50, tpot=0.1), 0.0)
    plan, _, _ = step(core, 0.0)
    core.add_request(req("late", 16, 5, tpot=0.1, arrival=plan.end_s), plan.end_s)
    t = plan.end_s
    for _ in range(5):  # three running: the fourth never joins
        plan, ids, _ = step(core, t)
        assert "late" not in ids
        t = plan.end_s
    assert core.status().waiting == 1
    assert core.abort("r0")
    _, ids, _ = step(core, t)
    assert "late" in ids


# ---- TTFT guard ------------------------------------------------------------------------------
# prefill of P tokens: 1e-4·P + 0.01 s on an idle engine
GUARD_CASES = [
    ("deadline already past", [req("x", 100, 5, ttft=0.5)], 1.0, ["x"]),
    ("long prompt, tiny deadline", [req("x", 2000, 5, ttft=0.05)], 0.0, ["x"]),
    ("feasible", [req("x", 100, 5, ttft=1.0)], 0.0, []),
    (
        "LDF walk: the second prefill pushes the later deadline past",
        [req("a", 1000, 5, ttft=0.15), req("b", 1000, 5, ttft=0.2)],
        0.0,
        ["b"],
    ),
    (
        "rejected ones do not delay the rest",
        [req("a", 3000, 5, ttft=0.1), req("b", 1000, 5, ttft=0.2)],
        0.0,
        ["a"],
    ),
]


@pytest.mark.parametrize("guard", [True, False])
@pytest.mark.parametrize(
    ("requests", "now", "rejected"),
    [c[1:] for c in GUARD_CASES],
    ids=[c[0] for c in GUARD_CASES],
)
def test_ttft_guard_rejects_hopeless_waiting_requests(h, guard, requests, now, rejected):
    core = scorpio_core(h, ttft_guard=guard)
    for r in requests:
        core.add_request(r, 0.0)
    plan = core.schedule(now)
    expected = rejected if guard else []
    assert [seq.request_id for seq, _ in plan.rejected] == expected
    for _, reason in plan.rejected:
        assert "TTFT guard" in reason
    scheduled = {c.seq.request_id for c in plan.chunks}
    assert scheduled == {r.request_id for r in requests} - set(expected)
    assert set(core.planner.state.seqs) == scheduled
    assert core.status().waiting == 0
    if plan.kind is StepKind.EXECUTE:
        core.update(plan)
    check_counters(h, core)


def test_ttft_guard_rejection_while_others_run_keeps_counters(h):
    core = scorpio_core(h, vbs_admission=False)
    core.add_request(req("run", 50, 20, ttft=5.0), 0.0)
    plan, _, _ = step(core, 0.0)
    t = plan.end_s
    core.add_request(req("ok", 50, 5, ttft=5.0, arrival=t), t)
    core.add_request(req("late", 50, 5, ttft=0.5, arrival=0.0), t)
    core.add_request(req("queued", 50, 5, ttft=5.0, arrival=t), t)
    plan = core.schedule(t + 1.0)
    assert [(s.request_id, "TTFT guard" in why) for s, why in plan.rejected] == [("late", True)]
    assert "late" not in core.planner.state.seqs
    assert {c.seq.request_id for c in plan.chunks} == {"run", "ok", "queued"}
    core.update(plan)
    check_counters(h, core)


def test_ttft_guard_never_rejects_requests_with_a_first_token(h):
    core = scorpio_core(h, vbs_admission=False)
    core.add_request(req("started", 100, 20, ttft=0.5), 0.0)
    plan, _, _ = step(core, 0.0)
    assert core.planner.state.seqs["started"].first_token_s == plan.end_s
    assert core.evict(["started"]) == ["started"]
    assert core.resume(["started"], plan.end_s) == ["started"]
    core.add_request(req("fresh", 100, 20, ttft=0.5), plan.end_s)
    plan = core.schedule(100.0)  # both TTFT deadlines long past
    assert [s.request_id for s, _ in plan.rejected] == ["fresh"]
    assert [c.seq.request_id for c in plan.chunks] == ["started"]
    core.update(plan)
    check_counters(h, core)


# ---- the TPOT model the admission check uses -------------------------------------------------
def test_prefill_interference_enlarges_the_tpot_estimate(h):
    on = scorpio_core(h, prior_input_tokens=1000, prior_output_tokens=100)
    off = scorpio_core(
        h, prior_input_tokens=1000, prior_output_tokens=100, prefill_interference=False
    )
    m_on, m_off = on.planner.tpot_model(), off.planner.tpot_model()
    assert isinstance(m_on, PrefillInterferenceTPOTModel)
    assert isinstance(m_off, DecodeTPOTModel)
    prefill_s = 1e-4 * 1000  # p1·I, the fixed p4 excluded
    for vbs, ctx in [(1.0, 100.0), (2.5, 500.0), (8.0, 2000.0)]:
        decode = h.profile().decode_time_s(ctx, vbs)
        assert m_off.estimate_s(vbs, ctx) == pytest.approx(decode)
        assert m_on.estimate_s(vbs, ctx) == pytest.approx(decode + vbs * prefill_s / 100)
        assert m_on.estimate_s(vbs, ctx) > m_off.estimate_s(vbs, ctx)


def test_measured_mean_lengths_move_toward_finished_requests(h):
    core = scorpio_core(h, prior_input_tokens=1000, prior_output_tokens=100)
    planner = core.planner
    before = planner.tpot_model().estimate_s(4.0, 200.0)
    core.add_request(req("a", 20, 4), 0.0)
    t, finished = 0.0, []
    while core.has_work:
        plan, _, done = step(core, t)
        finished += done
        t = plan.end_s
    assert finished == ["a"]
    assert planner.mean_input == pytest.approx(1000 + 0.05 * (20 - 1000))
    assert planner.mean_output == pytest.approx(100 + 0.05 * (4 - 100))
    model = planner.tpot_model()
    assert model.prefill_s_per_request == pytest.approx(1e-4 * planner.mean_input)
    assert model.mean_output_tokens == pytest.approx(planner.mean_output)
    assert model.estimate_s(4.0, 200.0) != pytest.approx(before)


def test_a_head_the_guard_rejects_evicts_nothing(h) -> None:
    core = h.core(1024, queue_policy="oracle-edf", scorpio=ScorpioConfig(vbs_admission=False))
    core.add_request(Request("r", "m", 900, 50, 0.0, SLO(100.0), true_output_tokens=50), 0.0)
    plan = core.schedule(0.0)
    core.update(plan)
    t = plan.end_s
    core.add_request(Request("w", "m", 800, 5, t, SLO(0.05), true_output_tokens=5), t)
    plan = core.schedule(t)
    assert [seq.request_id for seq, _ in plan.rejected] == ["w"]
    assert plan.preempted == []
