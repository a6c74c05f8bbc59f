"""BatchEstimator: T_serve equals the per-step sum, memory-bounded batch size, refitting."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from services.scheduler.core.batching.estimator import BatchEstimator, fit_estimator
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles import DecodeSample, PrefillSample

KV_BYTES_PER_TOKEN = 131072


def _profile(kv_tokens: int = 100_000) -> HardwareProfile:
    return HardwareProfile(
        gpu="test-gpu",
        model="test-model",
        tensor_parallel=1,
        prefill=PrefillCoeffs(p1=1.1e-4, p2=7.0e-4, p3=3.0e-5, p4=1.2e-2),
        decode=DecodeCoeffs(d1=9.0e-8, d2=1.1e-4, d3=4.0e-6, d4=1.3e-2),
        kv_capacity_bytes=kv_tokens * KV_BYTES_PER_TOKEN,
        kv_bytes_per_token=KV_BYTES_PER_TOKEN,
        weight_bytes=16 * 10**9,
        swap_bytes_s=25e9,
        cold_load_bytes_s=2e9,
        source="test",
    )


def _loop_serve_time(p: HardwareProfile, n: int, length: int, iterations: int) -> float:
    pre = p.prefill
    total = pre.p1 * n * length + pre.p2 * n + pre.p3 * length + pre.p4
    d = p.decode
    for k in range(1, iterations + 1):
        ctx = length + k
        total += d.d1 * n * ctx + d.d2 * n + d.d3 * ctx + d.d4
    return total


@pytest.mark.parametrize(
    ("n", "length", "iterations"),
    [(1, 1, 1), (1, 512, 0), (4, 32, 128), (16, 1024, 128), (64, 300, 17), (3, 4000, 1000)],
)
def test_serve_time_is_prefill_plus_decode_steps(n: int, length: int, iterations: int) -> None:
    est = BatchEstimator(_profile())
    expected = _loop_serve_time(est.profile, n, length, iterations)
    assert est.serve_time_s(n, length, iterations) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("kv_tokens", "zeta", "cap", "length", "iterations"),
    [
        (100_000, 0.9, 256, 1024, 128),  # memory-bound: floor(0.9·1e5 / 1152) = 78
        (100_000, 0.9, 256, 32, 128),  # memory allows 562 -> capped at 256
        (100_000, 0.9, 40, 1024, 128),  # engine cap 40 below memory's 78
        (100_000, 1.0, 256, 500, 0),  # exactly 200
        (1_000, 0.9, 256, 2000, 128),  # not even one request fits -> 0
        (10_000, 0.5, 256, 99, 1),  # floor(5000 / 100) = 50
    ],
)
def test_max_batch_from_memory(
    kv_tokens: int, zeta: float, cap: int, length: int, iterations: int
) -> None:
    est = BatchEstimator(_profile(kv_tokens), memory_fraction=zeta, max_batch_size=cap)
    capacity = kv_tokens * KV_BYTES_PER_TOKEN
    by_memory = math.floor(zeta * capacity / (KV_BYTES_PER_TOKEN * (length + iterations)))
    expected = min(cap, by_memory)
    assert est.max_batch(length, iterations) == expected
    assert est.fits(expected, length, iterations) or expected == 0
    assert not est.fits(expected + 1, length, iterations)


def test_max_batch_worked_values() -> None:
    est = BatchEstimator(_profile(100_000), memory_fraction=0.9, max_batch_size=256)
    assert est.max_batch(1024, 128) == 78
    assert est.max_batch(32, 128) == 256
    assert BatchEstimator(_profile(100_000), 1.0, 256).max_batch(500, 0) == 200


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("memory_fraction", {"memory_fraction": 0.0}),
        ("memory_fraction", {"memory_fraction": 1.5}),
        ("max_batch_size", {"max_batch_size": 0}),
    ],
)
def test_invalid_estimator_settings(field: str, kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=field):
        BatchEstimator(_profile(), **kwargs)  # type: ignore[arg-type]


TRUE_PREFILL = PrefillCoeffs(p1=2.0e-4, p2=5.0e-4, p3=1.0e-5, p4=2.0e-2)
TRUE_DECODE = DecodeCoeffs(d1=5.0e-7, d2=2.0e-4, d3=3.0e-6, d4=1.5e-2)
BATCHES = [1, 2, 4, 8, 16, 32, 64]
LENGTHS = [32, 128, 512, 1024, 2048]


def _as_list(c: PrefillCoeffs | DecodeCoeffs) -> list[float]:
    return [float(v) for v in dataclasses.astuple(c)]


def test_fit_estimator_recovers_exact_coefficients() -> None:
    base = BatchEstimator(_profile(), memory_fraction=0.8, max_batch_size=96)
    grid = list(itertools.product(BATCHES, LENGTHS))
    prefill = [PrefillSample(n, n_len, TRUE_PREFILL.time_s(n, n_len)) for n, n_len in grid]
    decode = [DecodeSample(n, float(c), TRUE_DECODE.time_s(c, n)) for n, c in grid]
    fit = fit_estimator(base, prefill, decode)
    prof = fit.estimator.profile
    assert _as_list(prof.prefill) == pytest.approx(_as_list(TRUE_PREFILL), rel=1e-6)
    assert _as_list(prof.decode) == pytest.approx(_as_list(TRUE_DECODE), rel=1e-6)
    assert fit.prefill_rmse_s < 1e-9
    assert fit.decode_rmse_s < 1e-9
    assert fit.prefill_r2 == pytest.approx(1.0, abs=1e-9)
    assert fit.decode_r2 == pytest.approx(1.0, abs=1e-9)
    # Memory settings and figures are kept; only the time coefficients change.
    assert fit.estimator.memory_fraction == 0.8
    assert fit.estimator.max_batch_size == 96
    assert prof.kv_capacity_bytes == base.profile.kv_capacity_bytes
    assert prof.source.startswith("fitted:")


def test_fit_estimator_serve_time_matches_truth_after_refit() -> None:
    base = BatchEstimator(_profile())
    grid = list(itertools.product(BATCHES, LENGTHS))
    prefill = [PrefillSample(n, n_len, TRUE_PREFILL.time_s(n, n_len)) for n, n_len in grid]
    decode = [DecodeSample(n, float(c), TRUE_DECODE.time_s(c, n)) for n, c in grid]
    est = fit_estimator(base, prefill, decode).estimator
    truth = dataclasses.replace(base.profile, prefill=TRUE_PREFILL, decode=TRUE_DECODE)
    expected = _loop_serve_time(truth, 16, 700, 128)
    assert est.serve_time_s(16, 700, 128) == pytest.approx(expected, rel=1e-6)
