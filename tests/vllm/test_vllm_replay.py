"""A short trace replayed on real vLLM (CPU build, tiny model): every request runs to exactly its
forced output length and gets positive latencies. Accuracy against the simulated engine is a
benchmark figure (`slomesh fidelity`), not asserted here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from slomesh.sim.trace import TraceSpec, make_trace

pytest.importorskip("vllm")

if TYPE_CHECKING:
    from services.replica.vllm.config import VLLMEngineConfig


def _tiny_config(model_dir: Path) -> VLLMEngineConfig:
    """The tiny model with 4 seats, 256-token steps and a 16 MiB KV cache."""
    from services.replica.vllm.config import VLLMEngineConfig

    return VLLMEngineConfig(
        model=str(model_dir),
        served_model_name="tiny-llama",
        dtype="float32",
        max_model_len=512,
        max_num_seqs=4,
        max_num_batched_tokens=256,
        kv_cache_memory_bytes=16 << 20,
    )


def test_replay_forces_output_lengths(tiny_model_dir: Path) -> None:
    from slomesh.sim.vllm_replay import replay_vllm

    trace = make_trace(
        TraceSpec(
            requests=8,
            rate_rps=8.0,
            seed=5,
            max_model_len=512,
            max_input_tokens=300,
            max_output_tokens=24,
        )
    )
    config = _tiny_config(tiny_model_dir)
    result = replay_vllm(trace, config, seed=5, warmup_requests=2, repeats=2)
    assert len(result.runs) == len(result.wall_s) == 2
    for run in result.runs:
        assert [t.request_id for t in run] == [t.request_id for t in trace]
        for tr, t in zip(trace, run, strict=True):
            assert t.output_tokens == tr.output_tokens
            assert t.input_tokens == tr.input_tokens
            assert 0 < t.ttft_s <= t.e2e_s
            assert t.tpot_s > 0
    lim = result.limits
    assert (lim.max_num_seqs, lim.max_num_batched_tokens) == (4, 256)
    assert lim.block_size_tokens >= 1 and lim.kv_blocks >= 1
    assert min(result.wall_s) > 0 and result.max_lateness_s >= 0


def test_step_recorder_logs_the_serving_engine_and_the_fit_reads_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """vLLM's own scheduler with the stopwatch: every prompt token is prefilled once in the
    logged steps (no prefix caching), every request is seen arriving and getting its first
    token, and the serving fit turns the log into a profile the simulator can replay."""
    from shared.profiles import default_profile
    from slomesh.profiling.serving_fit import apply_fit, fit_serving, load_step_log
    from slomesh.sim.replay import replay_sim, sim_engine_config
    from slomesh.sim.vllm_replay import replay_vllm

    trace = make_trace(
        TraceSpec(
            requests=10,
            rate_rps=10.0,
            seed=3,
            max_model_len=512,
            max_input_tokens=300,
            max_output_tokens=16,
        )
    )
    config = _tiny_config(tiny_model_dir)
    log_path = tmp_path / "steps.jsonl"
    result = replay_vllm(trace, config, seed=3, warmup_requests=1, step_log=log_path)
    log = load_step_log(log_path)
    ids = {t.request_id for t in trace}
    assert ids <= set(log.added_s) and ids <= set(log.first_token_s)
    assert all(log.first_token_s[r] > log.added_s[r] for r in ids)
    prefilled = sum(c for s in log.steps for c, _ in s.prefill)
    warmup_prompt = min(max(t.input_tokens for t in trace), 64)
    assert prefilled == sum(t.input_tokens for t in trace) + warmup_prompt
    decodes = sum(len(s.decode) for s in log.steps)
    assert decodes == sum(t.output_tokens - 1 for t in trace) + 8 - 1
    start = result.start_s[0]
    submitted = {t.request_id: start + t.arrival_s for t in result.timings}
    first = {t.request_id: start + t.arrival_s + t.ttft_s for t in result.timings}
    fit = fit_serving(log, submitted, first)
    assert fit.overhead_requests == len(trace) and fit.submit_overhead_s > 0
    profile = apply_fit(default_profile("A100-80GB", "llama-3.1-8b"), fit)
    sim = replay_sim(trace, profile, sim_engine_config(4, 256, result.limits.block_size_tokens))
    assert all(0 < s.ttft_s <= s.e2e_s for s in sim)
