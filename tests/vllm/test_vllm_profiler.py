"""The profiler's sweep against real vLLM (CPU build, tiny model): a very small sweep.

Timings on a shared 2-core machine are noisy, so this checks what the sweep must get right
regardless: every planned step ran as planned (the runner raises otherwise), the coefficients
are non-negative and predict positive step times, the fit's RMSE is reported, and the KV and
memory figures are what vLLM allocated.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from services.profiler.core.sweep import SweepSettings

pytest.importorskip("vllm")

TINY_SWEEP = SweepSettings(
    batch_sizes=(1, 4),
    prefill_lengths_tokens=(16, 64),
    decode_contexts_tokens=(16, 64),
    decode_steps=3,
    prefill_repeats=1,
    decode_repeats=1,
    mixed_requests=4,
    mixed_min_input_tokens=8,
    mixed_max_input_tokens=32,
    mixed_min_output_tokens=2,
    mixed_max_output_tokens=6,
)
KV_BYTES = 8 << 20


def test_small_vllm_sweep(tiny_model_dir: Path) -> None:
    from services.replica.vllm.config import VLLMEngineConfig
    from slomesh.profiling.vllm import profile_vllm

    config = VLLMEngineConfig(
        model=str(tiny_model_dir),
        served_model_name="tiny",
        dtype="float32",
        max_model_len=512,
        max_num_seqs=4,
        max_num_batched_tokens=256,
        kv_cache_memory_bytes=KV_BYTES,
    )
    fitted = profile_vllm(config, TINY_SWEEP)
    prof, report = fitted.profile, fitted.report
    assert (prof.gpu, prof.model, prof.tensor_parallel) == ("cpu", "tiny", 1)
    assert prof.source == "fitted:vllm sweep (4 prefill + 4 decode points)"
    for c in (*vars_of(prof.prefill), *vars_of(prof.decode)):
        assert c >= 0 and math.isfinite(c)
    assert prof.prefill_time_s(1, 16) > 0 and prof.decode_time_s(16, 1) > 0
    for kind in ("prefill", "decode"):
        fit = report["fit"][kind]
        assert fit["points"] == 4 and math.isfinite(fit["rmse_s"]) and fit["rmse_s"] >= 0
        assert all(p["median_s"] > 0 for p in report["points"][kind])
    # the tiny Llama: 2 layers, 2 KV heads, head_dim 32, float32 -> 2·2·2·32·4 bytes per token
    assert prof.kv_bytes_per_token == 1024
    blocks = report["engine_info"]["kv_blocks"]
    block_size = report["limits"]["block_size_tokens"]
    assert prof.kv_capacity_bytes == blocks * block_size * prof.kv_bytes_per_token
    assert 0 < prof.kv_capacity_bytes <= KV_BYTES
    assert report["limits"]["kv_capacity_tokens"] == blocks * block_size
    assert prof.weight_bytes > 0 and prof.swap_bytes_s > 0 and prof.cold_load_bytes_s > 0
    assert prof.inefficiency >= 1.0
    assert report["inefficiency"]["output_tokens"] > 0
    assert report["timings_s"]["engine_start"] > 0


def vars_of(coeffs: object) -> list[float]:
    return [float(getattr(coeffs, name)) for name in coeffs.__slots__]  # type: ignore[attr-defined]
