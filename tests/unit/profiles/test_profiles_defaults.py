"""Default profiles by name: smallest fitting tensor parallelism and the full table."""

from __future__ import annotations

import pytest

from shared.policy.registry import UnknownNameError
from shared.profiles import (
    RooflineParams,
    default_profile,
    default_profile_table,
    gpu_names,
    model_names,
    smallest_fitting_tp,
)

EXPECTED_TP = {
    ("A10-24GB", "mistral-7b"): 1,
    ("A10-24GB", "llama-3.1-8b"): 1,
    ("A10-24GB", "llama-2-13b"): 2,
    ("A10-24GB", "llama-2-70b"): 8,
    ("A100-80GB", "mistral-7b"): 1,
    ("A100-80GB", "llama-3.1-8b"): 1,
    ("A100-80GB", "llama-2-13b"): 1,
    ("A100-80GB", "llama-2-70b"): 2,
    ("H100-80GB", "mistral-7b"): 1,
    ("H100-80GB", "llama-3.1-8b"): 1,
    ("H100-80GB", "llama-2-13b"): 1,
    ("H100-80GB", "llama-2-70b"): 2,
    ("H200-141GB", "mistral-7b"): 1,
    ("H200-141GB", "llama-3.1-8b"): 1,
    ("H200-141GB", "llama-2-13b"): 1,
    ("H200-141GB", "llama-2-70b"): 2,
}


@pytest.mark.parametrize(("gpu", "model", "tp"), [(g, m, tp) for (g, m), tp in EXPECTED_TP.items()])
def test_default_profile_picks_smallest_fitting_tp(gpu: str, model: str, tp: int) -> None:
    profile = default_profile(gpu, model)
    assert profile.tensor_parallel == tp
    assert smallest_fitting_tp(gpu, model) == tp
    if tp > 1:  # the next smaller power of two must not fit
        with pytest.raises(ValueError, match="tensor_parallel"):
            default_profile(gpu, model, tp // 2)


def test_explicit_tp_is_respected() -> None:
    assert default_profile("H100-80GB", "llama-3.1-8b", 4).tensor_parallel == 4


def test_table_covers_every_pair_once() -> None:
    table = default_profile_table()
    assert len(table) == 16
    assert {(p.gpu, p.model) for p in table} == set(EXPECTED_TP)
    assert [(p.gpu, p.model) for p in table] == [(g, m) for g in gpu_names() for m in model_names()]
    for p in table:
        assert p.tensor_parallel == EXPECTED_TP[(p.gpu, p.model)]
        assert p.source.startswith("derived:roofline")


def test_nothing_fits_raises() -> None:
    params = RooflineParams(min_kv_tokens=10_000_000)
    with pytest.raises(ValueError, match=r"does not fit on A10-24GB with any tensor_parallel"):
        default_profile("A10-24GB", "llama-2-70b", params=params)


@pytest.mark.parametrize(
    ("gpu", "model", "family"), [("V100", "mistral-7b", "gpu"), ("A10-24GB", "gpt-4", "model")]
)
def test_unknown_names(gpu: str, model: str, family: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        default_profile(gpu, model)
    assert info.value.family == family
    assert len(info.value.valid) == 4
