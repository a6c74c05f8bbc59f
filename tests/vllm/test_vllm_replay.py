"""A short trace replayed on real vLLM (CPU build, tiny model): every request runs to exactly its
forced output length and gets positive latencies. Accuracy against the simulated engine is a
benchmark figure (`slomesh fidelity`), not asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from slomesh.sim.trace import TraceSpec, make_trace

pytest.importorskip("vllm")


def test_replay_forces_output_lengths(tiny_model_dir: Path) -> None:
    from services.replica.vllm.config import VLLMEngineConfig
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
    config = VLLMEngineConfig(
        model=str(tiny_model_dir),
        served_model_name="tiny-llama",
        dtype="float32",
        max_model_len=512,
        max_num_seqs=4,
        max_num_batched_tokens=256,
        kv_cache_memory_bytes=16 << 20,
    )
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
