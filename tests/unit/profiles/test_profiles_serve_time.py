"""T_serve closed form (HardwareProfile.serve_time_s) equals the explicit per-step sum."""

from __future__ import annotations

import pytest

from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles import default_profile


def _hand_profile() -> HardwareProfile:
    return HardwareProfile(
        gpu="test-gpu",
        model="test-model",
        tensor_parallel=1,
        prefill=PrefillCoeffs(p1=1.1e-4, p2=7.0e-4, p3=3.0e-5, p4=1.2e-2),
        decode=DecodeCoeffs(d1=9.0e-8, d2=1.1e-4, d3=4.0e-6, d4=1.3e-2),
        kv_capacity_bytes=10**10,
        kv_bytes_per_token=131072,
        weight_bytes=16 * 10**9,
        swap_bytes_s=25e9,
        cold_load_bytes_s=2e9,
        source="test",
    )


def _explicit_serve_time(p: HardwareProfile, n: int, length: int, iterations: int) -> float:
    total = p.prefill_time_s(n, length)
    for k in range(1, iterations + 1):
        total += p.decode_time_s(length + k, n)
    return total


PROFILES = {
    "hand": _hand_profile,
    "a100-8b": lambda: default_profile("A100-80GB", "llama-3.1-8b"),
    "a10-70b-tp8": lambda: default_profile("A10-24GB", "llama-2-70b"),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize(
    ("n", "length", "iterations"),
    [(1, 1, 1), (1, 512, 0), (8, 300, 17), (64, 1024, 256), (3, 4000, 1000)],
)
def test_closed_form_equals_explicit_sum(name: str, n: int, length: int, iterations: int) -> None:
    p = PROFILES[name]()
    closed = p.serve_time_s(n, length, iterations)
    assert closed == pytest.approx(_explicit_serve_time(p, n, length, iterations), rel=1e-12)


def test_hand_profile_value_by_hand() -> None:
    p = _hand_profile()
    # N=2, L=10, S=3: prefill = p1·20 + p2·2 + p3·10 + p4; contexts 11, 12, 13 (sum 36).
    prefill = 1.1e-4 * 20 + 7.0e-4 * 2 + 3.0e-5 * 10 + 1.2e-2
    decode = 9.0e-8 * 2 * 36 + 1.1e-4 * 2 * 3 + 4.0e-6 * 36 + 1.3e-2 * 3
    assert p.serve_time_s(2, 10, 3) == pytest.approx(prefill + decode, rel=1e-12)


def test_decode_only_step_time_matches_decode_estimator() -> None:
    p = _hand_profile()
    step = p.step_time_s(0, 0, 0, decode_seqs=4, decode_context_sum=4 * 700)
    assert step == pytest.approx(p.decode_time_s(700, 4), rel=1e-12)
