"""The sweep on the simulated engine gives back the profile the engine runs; ε ≈ 1 there."""

from __future__ import annotations

import dataclasses
import math

import pytest

from services.profiler.core.inefficiency import ideal_run_s, measure_inefficiency
from services.profiler.core.profile_fit import EngineFacts, fit_sweep
from services.profiler.core.runner import MixedRunMeasurement, PlanNotHonoured, run_sweep
from services.profiler.core.sweep import QUICK, EngineLimits, MixedRequest, plan_sweep
from shared.domain import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.domain.engine import EngineConfig
from shared.profiles import default_profile
from slomesh.profiling.simulated import profile_simulated, sim_config
from slomesh.sim.sweep_engine import SimSweepEngine

# every coefficient non-zero, so each one has to be recovered (the roofline has p3 = d3 = 0)
HAND = HardwareProfile(
    gpu="test-gpu",
    model="test-model",
    tensor_parallel=1,
    prefill=PrefillCoeffs(p1=2e-5, p2=3e-3, p3=4e-6, p4=0.011),
    decode=DecodeCoeffs(d1=3e-8, d2=4e-4, d3=2e-7, d4=0.009),
    kv_capacity_bytes=2_000_000 * 1024,
    kv_bytes_per_token=1024,
    weight_bytes=10**9,
    swap_bytes_s=1e10,
    cold_load_bytes_s=1e9,
    source="hand",
)


def close(a: float, b: float, rel: float = 0.02) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@pytest.mark.parametrize(
    "truth",
    [HAND, default_profile("A100-80GB", "llama-3.1-8b"), default_profile("A10-24GB", "mistral-7b")],
    ids=["hand", "a100-llama8b", "a10-mistral7b"],
)
def test_fit_recovers_the_simulated_profile(truth: HardwareProfile) -> None:
    fitted = profile_simulated(truth.gpu, truth.model, QUICK, truth=truth, max_num_seqs=16)
    got = fitted.profile
    for name in ("p1", "p2", "p3", "p4"):
        assert close(getattr(got.prefill, name), getattr(truth.prefill, name)), name
    for name in ("d1", "d2", "d3", "d4"):
        assert close(getattr(got.decode, name), getattr(truth.decode, name)), name
    assert fitted.prefill_fit.r2 > 0.999 and fitted.decode_fit.r2 > 0.999
    assert fitted.prefill_fit.rmse_s < 1e-6 and fitted.decode_fit.rmse_s < 1e-6
    # ε: the simulated engine is its own ideal
    assert fitted.inefficiency is not None
    assert got.inefficiency >= 1.0
    assert got.inefficiency == pytest.approx(1.0, abs=0.01)
    assert fitted.inefficiency.ratio == pytest.approx(1.0, abs=0.01)
    assert len(fitted.inefficiency.measured_runs_s) == QUICK.mixed_repeats
    # memory and links come from the simulated profile
    assert got.kv_capacity_bytes == truth.kv_capacity_bytes
    assert got.source.startswith("fitted:simulated sweep")
    report = fitted.report
    assert set(report["fit"]) == {"prefill", "decode"}
    assert report["fit"]["prefill"]["points"] == len(report["points"]["prefill"]) == 25
    assert report["engine_clock_s"]["sweep"] > 0


def test_ideal_run_matches_hand_computed_batch() -> None:
    # 2 requests of 10 prompt tokens, 3 tokens each, budget and seats for both: one prefill
    # step (2 seqs, 20 tokens, max len 10) then 2 decode steps at contexts 11 and 12
    lim = EngineLimits(8, 1024, 1 << 20, 1 << 20, 16)
    reqs = [MixedRequest(10, 3), MixedRequest(10, 3)]
    seconds, tokens = ideal_run_s(HAND, reqs, lim, SimSweepEngine)
    p, d = HAND.prefill, HAND.decode
    expected = (p.p1 * 20 + p.p2 * 2 + p.p3 * 10 + p.p4) + d.time_s(11, 2) + d.time_s(12, 2)
    assert tokens == 6
    assert seconds == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("slowdown", "epsilon", "ratio"),
    [(1.0, 1.0, 1.0), (1.5, 1.5, 1.5), (2.0, 2.0, 2.0), (0.8, 1.0, 0.8)],
)
def test_epsilon_is_ideal_over_measured_floored_at_one(
    slowdown: float, epsilon: float, ratio: float
) -> None:
    lim = EngineLimits(4, 4096, 1 << 20, 1 << 20, 16)
    reqs = [MixedRequest(50 + 10 * i, 5 + i) for i in range(8)]
    ideal_s, tokens = ideal_run_s(HAND, reqs, lim, SimSweepEngine)
    measured = MixedRunMeasurement(len(reqs), tokens, ideal_s * slowdown, steps=0)
    rep = measure_inefficiency(HAND, reqs, measured, lim, SimSweepEngine)
    assert rep.epsilon == pytest.approx(epsilon)
    assert rep.ratio == pytest.approx(ratio)
    assert rep.epsilon >= 1.0


def test_preemption_on_the_real_engine_shows_as_epsilon() -> None:
    # the measured engine has a KV cache too small for its batch: it preempts and recomputes;
    # the ideal (unlimited KV) does not, so ε > 1
    small = dataclasses.replace(HAND, kv_capacity_bytes=600 * 1024)  # 37 blocks of 16
    cfg = EngineConfig(max_num_seqs=8, max_num_batched_tokens=4096)
    engine = SimSweepEngine(small, cfg)
    reqs = [MixedRequest(100, 60) for _ in range(8)]
    for i, r in enumerate(reqs):
        engine.add(f"r{i}", r.input_tokens, r.output_tokens)
    tokens = 0
    while engine.has_work():
        tokens += engine.step().emitted
    assert engine.core.preemptions > 0
    lim = EngineLimits(8, 4096, 592, 592, 16)
    rep = measure_inefficiency(
        HAND, reqs, MixedRunMeasurement(8, tokens, engine.now_s(), 0), lim, SimSweepEngine
    )
    assert rep.epsilon > 1.05


def test_runner_refuses_a_prefill_split_over_steps() -> None:
    engine = SimSweepEngine(HAND, EngineConfig(max_num_seqs=16, max_num_batched_tokens=512))
    # a plan made for a larger token budget than the engine really has
    plan = plan_sweep(EngineLimits(16, 1 << 20, 1 << 20, 1 << 20, 16), QUICK)
    with pytest.raises(PlanNotHonoured, match=r"prefill together|prefilled in one step"):
        run_sweep(engine, plan)


def test_fit_sweep_without_mixed_run_keeps_epsilon_one() -> None:
    engine = SimSweepEngine(HAND, sim_config(QUICK, HAND, 16))
    plan = dataclasses.replace(plan_sweep(engine.limits, QUICK), mixed=())
    measured = run_sweep(engine, plan)
    facts = EngineFacts("test-gpu", "test-model", 1, 10**6, 1024, 10**9, 1e10, 1e9)
    fitted = fit_sweep(measured, facts, "simulated", SimSweepEngine)
    assert fitted.inefficiency is None and fitted.profile.inefficiency == 1.0
    assert fitted.report["inefficiency"] is None
