"""Forward-pass profile of the Llama-3.1-8B shape (bf16, random weights) on CUDA vs the roofline.

Skipped without CUDA (tests/gpu/conftest.py), on a GPU outside the catalog and on one with too
little memory for the quick grid. The bound on decode is deliberately broad: eager PyTorch pays
kernel launches on the CPU every step and DynamicCache copies the KV cache once per step, so a
measured step is expected to be slower than the roofline (which models vLLM with CUDA graphs),
but not by more than a few times; a result outside 0.5-5x means the roofline or the profiler is
off, not noise.
"""

from __future__ import annotations

import dataclasses

import pytest

from services.profiler import torch_forward as tf
from shared.profiles import gpu_names

pytestmark = pytest.mark.gpu

MIN_MEMORY_BYTES = 40 * 2**30
"""16 GB of weights plus up to ~17 GB of KV (N=32, context 2048, with DynamicCache's copy)."""


def catalog_gpu(device_name: str) -> str | None:
    """The catalog GPU whose family ("H200" of "H200-141GB") appears in the CUDA device name."""
    for name in gpu_names():
        if name.split("-")[0].lower() in device_name.lower():
            return name
    return None


def _measure_quick(decode_mode: str) -> tf.Comparison:
    import torch

    props = torch.cuda.get_device_properties(0)
    gpu = catalog_gpu(props.name)
    if gpu is None:
        pytest.skip(f"{props.name} is not in the GPU catalog ({', '.join(gpu_names())})")
    if props.total_memory < MIN_MEMORY_BYTES:
        pytest.skip(f"{props.name} has {props.total_memory / 2**30:.0f} GiB, the grid needs 40")
    grid = tf.default_grid("llama-3.1-8b", quick=True)
    m = tf.measure(tf.LLAMA_31_8B, device="cuda", dtype="bf16", grid=grid, decode_mode=decode_mode)
    c = tf.compare(m, gpu)
    print(tf.render_report(c))  # visible with -s: the numbers to record
    return c


@pytest.fixture(scope="module")
def comparison() -> tf.Comparison:
    return _measure_quick("eager")


@pytest.fixture(scope="module")
def graph_comparison() -> tf.Comparison:
    return _measure_quick("cuda-graph")


def test_graph_decode_is_close_to_the_roofline(graph_comparison: tf.Comparison) -> None:
    # Replayed from a CUDA graph on a static cache with fused grouped-query attention, a decode
    # step is what the roofline models (weights and KV streamed from HBM): no launch or copy
    # overhead is left to excuse a large gap either way.
    assert graph_comparison.measurement.decode_mode == "cuda-graph"
    ratios = [p.ratio for p in graph_comparison.phase("decode")]
    assert 0.5 <= graph_comparison.decode_ratio_median <= 2.0, (
        f"measured/roofline decode ratios {ratios}\n{tf.render_report(graph_comparison)}"
    )
    assert graph_comparison.decode_efficiency <= 1.05


def test_decode_is_within_a_broad_factor_of_the_roofline(comparison: tf.Comparison) -> None:
    ratios = [p.ratio for p in comparison.phase("decode")]
    assert 0.5 <= comparison.decode_ratio_median <= 5.0, (
        f"measured/roofline decode ratios {ratios}\n{tf.render_report(comparison)}"
    )


def test_achieved_rates_stay_below_the_datasheet_peaks(comparison: tf.Comparison) -> None:
    # A measured rate above the datasheet would mean the FLOP/byte accounting or timing is wrong.
    assert 0 < comparison.prefill_efficiency <= 1.05
    assert 0 < comparison.decode_efficiency <= 1.05


def test_fitted_profile_is_a_gpu_profile(comparison: tf.Comparison) -> None:
    p = comparison.fitted.profile
    assert p.gpu == comparison.gpu.name and p.model == "llama-3.1-8b"
    assert all(c >= 0 for c in dataclasses.astuple(p.prefill) + dataclasses.astuple(p.decode))
    assert p.kv_capacity_bytes > 0 and p.kv_bytes_per_token == 131072
    assert p.weight_bytes == 2 * tf.LLAMA_31_8B.param_count()
