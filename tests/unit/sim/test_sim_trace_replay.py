"""The replay trace (seeded, JSONL) and its replay on a lone simulated engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.domain import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from slomesh.sim.replay import replay_sim, sim_engine_config
from slomesh.sim.trace import TraceRequest, TraceSpec, load_trace, make_trace, save_trace


def _profile() -> HardwareProfile:
    return HardwareProfile(
        gpu="cpu",
        model="tiny",
        tensor_parallel=1,
        prefill=PrefillCoeffs(p1=1e-5, p2=1e-3, p3=2e-5, p4=5e-3),
        decode=DecodeCoeffs(d1=1e-7, d2=5e-4, d3=1e-7, d4=4e-3),
        kv_capacity_bytes=64 << 20,
        kv_bytes_per_token=512,
        weight_bytes=1 << 20,
        swap_bytes_s=1e9,
        cold_load_bytes_s=1e9,
    )


def test_trace_is_determined_by_its_seed() -> None:
    spec = TraceSpec(requests=60, rate_rps=3.0, seed=7)
    assert make_trace(spec) == make_trace(spec)
    assert make_trace(spec) != make_trace(TraceSpec(requests=60, rate_rps=3.0, seed=8))


def test_trace_fits_the_model_context() -> None:
    spec = TraceSpec(requests=200, seed=1, max_model_len=1024, max_input_tokens=900)
    trace = make_trace(spec)
    arrivals = [t.arrival_s for t in trace]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    assert len({t.request_id for t in trace}) == 200
    for t in trace:
        assert 1 <= t.input_tokens <= 900
        assert 2 <= t.output_tokens <= spec.max_output_tokens
        assert t.input_tokens + t.output_tokens <= 1024
    rate = (len(trace) - 1) / (arrivals[-1] - arrivals[0])
    assert rate == pytest.approx(spec.rate_rps, rel=0.25)


def test_trace_jsonl_round_trip(tmp_path: Path) -> None:
    trace = make_trace(TraceSpec(requests=12, seed=3))
    path = tmp_path / "sub" / "trace.jsonl"
    save_trace(path, trace)
    assert len(path.read_text().splitlines()) == 12
    assert load_trace(path) == trace


def test_load_trace_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"request_id": "a", "arrival_s": 0, "input_tokens": 4, "output_tokens": 2}\n{}\n'
    )
    with pytest.raises(ValueError, match=r"bad\.jsonl:2"):
        load_trace(path)


def test_sim_replay_latencies_are_consistent() -> None:
    prof = _profile()
    trace = make_trace(TraceSpec(requests=40, rate_rps=4.0, seed=2))
    timings = replay_sim(trace, prof, sim_engine_config(4, 512, 128))
    assert [t.request_id for t in timings] == [t.request_id for t in trace]
    for tr, t in zip(trace, timings, strict=True):
        assert t.output_tokens == tr.output_tokens
        assert t.ttft_s >= prof.prefill_time_s(1, min(tr.input_tokens, 512)) - 1e-12
        assert t.e2e_s == pytest.approx(t.ttft_s + (t.output_tokens - 1) * t.tpot_s)
        assert t.tpot_s > 0


def test_sim_replay_lone_request_matches_the_profile() -> None:
    prof = _profile()
    trace = [TraceRequest("a", 1.5, 300, 5)]
    (t,) = replay_sim(trace, prof, sim_engine_config(4, 2048, 16))
    assert t.ttft_s == pytest.approx(prof.prefill_time_s(1, 300))
    steps = [prof.decode_time_s(300 + k, 1) for k in range(1, 5)]
    assert t.e2e_s - t.ttft_s == pytest.approx(sum(steps))
