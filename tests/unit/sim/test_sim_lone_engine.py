"""The lone-engine driver shared by engine-check, the fidelity replay and the sweep engine."""

from __future__ import annotations

import itertools

import pytest

from services.replica.core.outputs import StepPlan
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, PrefillCoeffs, Request
from shared.domain.engine import EngineConfig
from slomesh.sim.lone_engine import EngineStalled, LoneEngine

PROFILE = HardwareProfile(
    gpu="test-gpu",
    model="m",
    tensor_parallel=1,
    prefill=PrefillCoeffs(1e-4, 0.0, 0.0, 0.01),
    decode=DecodeCoeffs(1e-7, 1e-4, 0.0, 0.01),
    kv_capacity_bytes=4096 * 1000,
    kv_bytes_per_token=1000,
    weight_bytes=10**9,
    swap_bytes_s=1e10,
    cold_load_bytes_s=1e9,
)


def request(rid: str, arrival: float, input_tokens: int = 20, output: int = 3) -> Request:
    return Request(rid, "m", input_tokens, output, arrival, SLO(10.0), true_output_tokens=output)


def test_run_feeds_arrivals_at_step_ends_and_jumps_over_idle_time():
    engine = LoneEngine("t", PROFILE, EngineConfig())
    plans: list[StepPlan] = []
    seqs = engine.run([request("late", 5.0), request("early", 0.0)], plans.append)
    assert [s.request_id for s in seqs] == ["early", "late"]  # arrival order
    starts = [p.start_s for p in plans]
    assert starts == sorted(starts) and 5.0 in starts  # idle until the late arrival
    assert all(a.end_s <= b.start_s for a, b in itertools.pairwise(plans))
    assert all(s.finish_s is not None and s.num_output_tokens == 3 for s in seqs)
    assert seqs[1].enqueue_s == 5.0 and engine.now_s == plans[-1].end_s
    assert not engine.core.has_work


def test_step_moves_the_clock_and_an_idle_engine_stalls():
    engine = LoneEngine("t", PROFILE, EngineConfig())
    with pytest.raises(EngineStalled, match="idle"):
        engine.step()
    engine.add(request("a", 0.0, output=2))
    seen: list[StepPlan] = []
    first = engine.step(seen.append)
    assert [s.request_id for s in first.emitted] == ["a"] and engine.now_s == seen[0].end_s
    assert engine.step().finished[0].request_id == "a"
    assert isinstance(EngineStalled("x"), RuntimeError)
