"""Roofline derivation: memory fit rule, coefficient structure, monotonicity and sanity ranges."""

from __future__ import annotations

import pytest

from shared.profiles import (
    RooflineParams,
    derive_profile,
    gpu_names,
    gpu_spec,
    kv_capacity_bytes,
    min_tensor_parallel,
    model_names,
    model_spec,
)

ALL_PAIRS = [(g, m) for g in gpu_names() for m in model_names()]


def test_kv_capacity_by_hand() -> None:
    # llama-3.1-8b on 1 x A100-80GB: 0.9 · 80e9 − 2 · 8_030_261_248 − 2 GiB
    expected = 72_000_000_000 - 16_060_522_496 - 2_147_483_648
    profile = derive_profile(gpu_spec("A100-80GB"), model_spec("llama-3.1-8b"))
    assert profile.kv_capacity_bytes == expected == 53_791_993_856
    assert profile.kv_capacity_tokens == expected // 131072


@pytest.mark.parametrize("gpu", ["A100-80GB", "H100-80GB", "H200-141GB"])
def test_70b_does_not_fit_on_one_gpu_and_names_tensor_parallel(gpu: str) -> None:
    with pytest.raises(ValueError, match=r"needs tensor_parallel >= 2") as info:
        derive_profile(gpu_spec(gpu), model_spec("llama-2-70b"), 1)
    assert f"llama-2-70b (138.0 GB of weights) does not fit on 1 x {gpu}" in str(info.value)


@pytest.mark.parametrize(("gpu", "tp"), [("A100-80GB", 2), ("H100-80GB", 2), ("H200-141GB", 2)])
def test_70b_fits_at_tp2(gpu: str, tp: int) -> None:
    profile = derive_profile(gpu_spec(gpu), model_spec("llama-2-70b"), tp)
    assert profile.tensor_parallel == tp
    assert profile.kv_capacity_tokens > 2048


@pytest.mark.parametrize(
    ("gpu", "model", "need"),
    [
        ("A10-24GB", "mistral-7b", 1),
        ("A10-24GB", "llama-2-13b", 2),
        ("A10-24GB", "llama-2-70b", 8),
        ("A100-80GB", "llama-2-13b", 1),
        ("A100-80GB", "llama-2-70b", 2),
        ("H200-141GB", "llama-2-70b", 2),
    ],
)
def test_min_tensor_parallel(gpu: str, model: str, need: int) -> None:
    assert min_tensor_parallel(gpu_spec(gpu), model_spec(model), RooflineParams()) == need


def test_minimum_kv_room_is_part_of_the_rule() -> None:
    # mistral-7b on one A10 leaves ~37.9K tokens of KV: fine for 2048, not for 40000.
    gpu, model = gpu_spec("A10-24GB"), model_spec("mistral-7b")
    assert derive_profile(gpu, model).kv_capacity_tokens > 2048
    with pytest.raises(ValueError, match=r"needs tensor_parallel >= 2.*40000 tokens of KV"):
        derive_profile(gpu, model, 1, RooflineParams(min_kv_tokens=40_000))


@pytest.mark.parametrize("tp", [0, -1, 3])
def test_invalid_tensor_parallel(tp: int) -> None:
    with pytest.raises(ValueError, match="tensor_parallel"):
        derive_profile(gpu_spec("A100-80GB"), model_spec("llama-3.1-8b"), tp)


@pytest.mark.parametrize(("gpu", "model"), ALL_PAIRS)
def test_structure_of_derived_coefficients(gpu: str, model: str) -> None:
    g, m = gpu_spec(gpu), model_spec(model)
    tp = min_tensor_parallel(g, m, RooflineParams())
    assert tp is not None
    while m.attention_heads % tp:
        tp += 1
    p = derive_profile(g, m, tp)
    assert p.source.startswith("derived:roofline")
    assert "eff_mem=0.7" in p.source and "eff_compute=0.5" in p.source
    assert p.inefficiency == 1.0
    assert p.decode.d3 == 0.0 and p.prefill.p3 == 0.0
    assert min(p.decode.d1, p.decode.d2, p.decode.d4) > 0
    assert min(p.prefill.p1, p.prefill.p2, p.prefill.p4) > 0
    assert p.prefill.p4 == p.decode.d4  # the weight read is the shared fixed term
    assert p.decode.d4 > m.weight_bytes / (tp * g.hbm_bytes_s)  # below 100% of HBM bandwidth
    assert p.swap_bytes_s == pytest.approx(tp * g.pcie_bytes_s)
    assert p.cold_load_bytes_s == pytest.approx(g.disk_bytes_s)
    assert p.kv_bytes_per_token == m.kv_bytes_per_token
    assert p.weight_bytes == m.weight_bytes


@pytest.mark.parametrize(
    ("gpu", "model"), [("A100-80GB", "llama-3.1-8b"), ("A10-24GB", "mistral-7b")]
)
def test_decode_time_grows_with_batch_and_context(gpu: str, model: str) -> None:
    p = derive_profile(gpu_spec(gpu), model_spec(model))
    batches = [1, 8, 64, 256]
    contexts = [128, 1024, 4096]
    for ctx in contexts:
        times = [p.decode_time_s(ctx, n) for n in batches]
        assert times == sorted(times) and len(set(times)) == len(times)
    for n in batches:
        times = [p.decode_time_s(ctx, n) for ctx in contexts]
        assert times == sorted(times) and len(set(times)) == len(times)


def test_prefill_time_grows_with_tokens() -> None:
    p = derive_profile(gpu_spec("H100-80GB"), model_spec("llama-3.1-8b"))
    assert p.prefill_time_s(1, 512) < p.prefill_time_s(1, 1024) < p.prefill_time_s(2, 1024)


def test_tensor_parallel_speeds_up_decode_and_adds_allreduce() -> None:
    g, m = gpu_spec("A100-80GB"), model_spec("llama-2-13b")
    one, two = derive_profile(g, m, 1), derive_profile(g, m, 2)
    assert two.decode_time_s(1024, 1) < one.decode_time_s(1024, 1)
    # Weight read halves, but two all-reduces per layer add latency on top.
    assert two.decode.d4 > one.decode.d4 / 2
    assert two.kv_capacity_bytes > 2 * one.kv_capacity_bytes


@pytest.mark.parametrize(
    ("gpu", "low_ms", "high_ms"), [("A100-80GB", 10.0, 14.0), ("H100-80GB", 6.0, 9.0)]
)
def test_batch1_decode_sanity_range(gpu: str, low_ms: float, high_ms: float) -> None:
    p = derive_profile(gpu_spec(gpu), model_spec("llama-3.1-8b"))
    assert low_ms < p.decode_time_s(1024, 1) * 1e3 < high_ms


def test_saturated_decode_throughput_in_thousands() -> None:
    p = derive_profile(gpu_spec("A100-80GB"), model_spec("llama-3.1-8b"))
    tok_s = 256 / p.decode_time_s(1024, 256)
    assert 1_000 < tok_s < 10_000
    assert tok_s > 25 * p.batch1_decode_tokens_s(1024)


def test_efficiency_factors_move_the_estimate_and_the_label() -> None:
    g, m = gpu_spec("H100-80GB"), model_spec("mistral-7b")
    base = derive_profile(g, m)
    faster = derive_profile(g, m, params=RooflineParams(eff_mem=0.9, eff_compute=0.7))
    assert faster.decode.d4 < base.decode.d4
    assert faster.prefill.p1 < base.prefill.p1
    assert "eff_mem=0.9" in faster.source and "eff_compute=0.7" in faster.source


@pytest.mark.parametrize(
    "kwargs", [{"eff_mem": 0.0}, {"eff_compute": 1.5}, {"gpu_memory_utilization": 0}, {"bogus": 1}]
)
def test_roofline_params_validate(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RooflineParams(**kwargs)  # type: ignore[arg-type]


def test_kv_capacity_function_matches_profile() -> None:
    g, m = gpu_spec("H200-141GB"), model_spec("llama-2-70b")
    params = RooflineParams()
    assert derive_profile(g, m, 2).kv_capacity_bytes == kv_capacity_bytes(g, m, 2, params)
    assert kv_capacity_bytes(g, m, 1, params) < 0
