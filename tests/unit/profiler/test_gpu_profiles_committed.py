"""The measured GPU profiles in deploy/ray/profiles (from `slomesh profile-forward` with CUDA-graph
decode) against the roofline the simulator uses for the same GPU: decode steps agree within
0.5-2x over a grid of batch sizes and contexts, so a simulated H100 or H200's TPOT is a
calibrated figure. A roofline change that breaks this is caught here, without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.profiles.defaults import default_profile
from shared.profiles.io import load_profiles

PROFILES = Path(__file__).resolve().parents[3] / "deploy" / "ray" / "profiles"


@pytest.mark.parametrize(
    ("file", "gpu"),
    [
        ("llama-3.1-8b-H100-80GB-bf16.json", "H100-80GB"),
        ("llama-3.1-8b-H200-141GB-bf16.json", "H200-141GB"),
    ],
)
def test_measured_decode_agrees_with_the_roofline(file: str, gpu: str) -> None:
    (measured,) = load_profiles(PROFILES / file)
    assert (measured.gpu, measured.model, measured.tensor_parallel) == (gpu, "llama-3.1-8b", 1)
    assert measured.source.startswith("fitted:torch-forward(")
    assert "decode=cuda-graph" in measured.source
    roof = default_profile(gpu, "llama-3.1-8b", 1)
    assert measured.kv_bytes_per_token == roof.kv_bytes_per_token
    assert measured.weight_bytes == pytest.approx(roof.weight_bytes, rel=0.01)
    for n in (1, 8, 64):
        for context in (256.0, 1024.0, 4096.0):
            ratio = measured.decode_time_s(context, n) / roof.decode_time_s(context, n)
            assert 0.5 <= ratio <= 2.0, (n, context, ratio)
