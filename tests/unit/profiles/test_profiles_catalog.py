"""Catalog: model shapes give the hand-computed KV and weight sizes; lookups fail helpfully."""

from __future__ import annotations

import pytest

from shared.policy.registry import UnknownNameError
from shared.profiles import gpu_names, gpu_spec, model_names, model_spec


@pytest.mark.parametrize(
    ("model", "kv_bytes_per_token"),
    [
        # 2 (K and V) · layers · kv_heads · head_dim · 2 bytes (bf16)
        ("mistral-7b", 2 * 32 * 8 * 128 * 2),  # 131072
        ("llama-3.1-8b", 2 * 32 * 8 * 128 * 2),  # 131072
        ("llama-2-13b", 2 * 40 * 40 * 128 * 2),  # 819200
        ("llama-2-70b", 2 * 80 * 8 * 128 * 2),  # 327680
    ],
)
def test_kv_bytes_per_token_by_hand(model: str, kv_bytes_per_token: int) -> None:
    assert model_spec(model).kv_bytes_per_token == kv_bytes_per_token


def test_kv_bytes_literal_values() -> None:
    assert model_spec("llama-3.1-8b").kv_bytes_per_token == 131072
    assert model_spec("llama-2-13b").kv_bytes_per_token == 819200
    assert model_spec("llama-2-70b").kv_bytes_per_token == 327680


@pytest.mark.parametrize(
    ("model", "billions"),
    [("mistral-7b", 7.24), ("llama-3.1-8b", 8.03), ("llama-2-13b", 13.0), ("llama-2-70b", 69.0)],
)
def test_params_and_bf16_weight_bytes(model: str, billions: float) -> None:
    spec = model_spec(model)
    assert spec.params == pytest.approx(billions * 1e9, rel=0.005)
    assert spec.dtype_bytes == 2
    assert spec.weight_bytes == 2 * spec.params
    assert spec.hidden_size == spec.attention_heads * spec.head_dim


@pytest.mark.parametrize(
    ("gpu", "memory", "hbm", "flops", "nvlink"),
    [
        ("A10-24GB", 24e9, 600e9, 125e12, 25e9),  # no NVLink: peers over PCIe
        ("A100-80GB", 80e9, 2.039e12, 312e12, 600e9),
        ("H100-80GB", 80e9, 3.35e12, 989e12, 900e9),
        ("H200-141GB", 141e9, 4.8e12, 989e12, 900e9),
    ],
)
def test_gpu_datasheet_figures(
    gpu: str, memory: float, hbm: float, flops: float, nvlink: float
) -> None:
    spec = gpu_spec(gpu)
    assert spec.memory_bytes == int(memory)
    assert spec.hbm_bytes_s == pytest.approx(hbm)
    assert spec.peak_flops == pytest.approx(flops)
    assert spec.nvlink_bytes_s == pytest.approx(nvlink)
    assert spec.disk_bytes_s == pytest.approx(2e9)


def test_names_are_exact() -> None:
    assert gpu_names() == ["A10-24GB", "A100-80GB", "H100-80GB", "H200-141GB"]
    assert model_names() == ["mistral-7b", "llama-3.1-8b", "llama-2-13b", "llama-2-70b"]


@pytest.mark.parametrize(
    ("lookup", "family", "bad", "valid"),
    [
        (gpu_spec, "gpu", "B200", "A10-24GB, A100-80GB, H100-80GB, H200-141GB"),
        (model_spec, "model", "llama-3-8b", "mistral-7b, llama-3.1-8b, llama-2-13b, llama-2-70b"),
    ],
)
def test_unknown_name_lists_valid_names(lookup: object, family: str, bad: str, valid: str) -> None:
    assert callable(lookup)
    with pytest.raises(UnknownNameError) as info:
        lookup(bad)
    assert info.value.family == family
    assert info.value.name == bad
    assert valid in str(info.value)
