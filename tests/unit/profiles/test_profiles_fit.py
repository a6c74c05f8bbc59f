"""Refitting step-time coefficients: exact and noisy recovery, degenerate designs, ε."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from shared.domain.profile import DecodeCoeffs, PrefillCoeffs
from shared.profiles import (
    DecodeSample,
    PrefillSample,
    default_profile,
    fit_decode,
    fit_inefficiency,
    fit_prefill,
    refit_profile,
)

BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
LENGTHS = [64, 128, 256, 512, 1024, 2048, 4096]

DECODE_TRUE = [
    DecodeCoeffs(d1=9.2e-8, d2=1.0e-4, d3=2.0e-6, d4=1.3e-2),
    DecodeCoeffs(d1=3.0e-7, d2=5.0e-5, d3=1.0e-5, d4=3.0e-2),
]
PREFILL_TRUE = [
    PrefillCoeffs(p1=1.0e-4, p2=1.0e-3, p3=5.0e-5, p4=1.3e-2),
    PrefillCoeffs(p1=3.0e-5, p2=2.0e-4, p3=2.0e-6, p4=5.0e-3),
]


def _decode_samples(
    c: DecodeCoeffs, noise: float, rng: np.random.Generator | None
) -> list[DecodeSample]:
    out = []
    for n, ctx in itertools.product(BATCHES, LENGTHS):
        t = c.time_s(ctx, n)
        if rng is not None:
            t *= 1.0 + noise * rng.standard_normal()
        out.append(DecodeSample(n=n, context=float(ctx), time_s=t))
    return out


def _prefill_samples(
    c: PrefillCoeffs, noise: float, rng: np.random.Generator | None, repeats: int = 1
) -> list[PrefillSample]:
    out = []
    for n, length, _ in itertools.product(BATCHES[:6], LENGTHS, range(repeats)):
        t = c.time_s(n, length)
        if rng is not None:
            t *= 1.0 + noise * rng.standard_normal()
        out.append(PrefillSample(n=n, length=length, time_s=t))
    return out


def _as_list(c: DecodeCoeffs | PrefillCoeffs) -> list[float]:
    return [float(v) for v in dataclasses.astuple(c)]


@pytest.mark.parametrize("true", DECODE_TRUE, ids=["decode-a", "decode-b"])
def test_decode_fit_recovers_noiseless_coefficients(true: DecodeCoeffs) -> None:
    result = fit_decode(_decode_samples(true, 0.0, None))
    assert _as_list(result.coeffs) == pytest.approx(_as_list(true), rel=1e-6)
    assert result.samples == len(BATCHES) * len(LENGTHS)
    assert result.r2 == pytest.approx(1.0, abs=1e-12)
    assert result.rmse_s < 1e-12


@pytest.mark.parametrize("true", PREFILL_TRUE, ids=["prefill-a", "prefill-b"])
def test_prefill_fit_recovers_noiseless_coefficients(true: PrefillCoeffs) -> None:
    result = fit_prefill(_prefill_samples(true, 0.0, None))
    assert _as_list(result.coeffs) == pytest.approx(_as_list(true), rel=1e-6)
    assert result.r2 == pytest.approx(1.0, abs=1e-12)


def test_minimal_exact_design_of_four_samples() -> None:
    true = DECODE_TRUE[0]
    pts = [(1, 100.0), (8, 100.0), (1, 2000.0), (8, 2000.0)]
    samples = [DecodeSample(n, ctx, true.time_s(ctx, n)) for n, ctx in pts]
    assert _as_list(fit_decode(samples).coeffs) == pytest.approx(_as_list(true), rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("true", DECODE_TRUE, ids=["decode-a", "decode-b"])
def test_decode_fit_with_noise_within_a_few_percent(true: DecodeCoeffs, seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = _decode_samples(true, 0.01, rng)
    result = fit_decode(samples)
    # 1% timing noise, 63 steps: every coefficient within 6% (worst of 50 seeds: 5.2%).
    assert _as_list(result.coeffs) == pytest.approx(_as_list(true), rel=0.06)
    assert result.r2 > 0.99
    assert result.rmse_s > 0


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("true", PREFILL_TRUE, ids=["prefill-a", "prefill-b"])
def test_prefill_fit_with_noise_within_a_few_percent(true: PrefillCoeffs, seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = _prefill_samples(true, 0.01, rng, repeats=3)  # 3 timings per (N, L), as profiled
    result = fit_prefill(samples)
    fitted = result.coeffs
    # The dominant terms (per token, fixed) within a few %; p2 and p3 contribute well under 10%
    # of any step here, so 1% timing noise only pins them to within ~20% (worst of 50 seeds: 13%).
    assert fitted.p1 == pytest.approx(true.p1, rel=0.02)
    assert fitted.p4 == pytest.approx(true.p4, rel=0.04)
    assert [fitted.p2, fitted.p3] == pytest.approx([true.p2, true.p3], rel=0.2)
    for s in samples:  # predictions within 2% of the noiseless truth everywhere on the grid
        assert fitted.time_s(s.n, s.length) == pytest.approx(true.time_s(s.n, s.length), rel=0.02)
    assert result.r2 > 0.99


def test_zero_coefficient_stays_non_negative() -> None:
    true = DecodeCoeffs(d1=1e-7, d2=1e-4, d3=0.0, d4=1e-2)
    rng = np.random.default_rng(7)
    result = fit_decode(_decode_samples(true, 0.01, rng))
    assert min(_as_list(result.coeffs)) >= 0.0
    assert result.coeffs.d3 < 1e-6


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([DecodeSample(1, 10.0, 0.01), DecodeSample(2, 20.0, 0.02)], "at least 4 samples"),
        (
            [DecodeSample(4, float(c), 0.01 + c * 1e-6) for c in (10, 20, 30, 40)],
            "2 distinct batch sizes",
        ),
        ([DecodeSample(n, 512.0, 0.01 + n * 1e-4) for n in (1, 2, 4, 8)], "2 distinct context"),
        # context = batch size: the N and L columns coincide -> rank 3.
        ([DecodeSample(n, float(n), 0.01 + n * 1e-4) for n in (1, 2, 3, 4, 5)], "degenerate"),
        # Only three distinct (N, L) points, repeated.
        (
            [DecodeSample(n, c, 0.02) for n, c in [(1, 10.0), (2, 10.0), (1, 20.0)] * 3],
            "degenerate",
        ),
        ([DecodeSample(0, 1.0, 0.01)] * 4, "n must be an int >= 1"),
        ([DecodeSample(1, 1.0, -0.01)] * 4, "time_s must be finite and > 0"),
        ([DecodeSample(1, 1.0, 0.0)] * 4, "time_s must be finite and > 0"),
        ([DecodeSample(1, float("nan"), 0.01)] * 4, "context must be finite"),
    ],
)
def test_degenerate_decode_inputs_raise(samples: list[DecodeSample], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_decode(samples)


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "at least 4 samples"),
        (
            [PrefillSample(1, length, 0.01 * length) for length in (64, 128, 256, 512)],
            "2 distinct batch sizes",
        ),
        ([PrefillSample(n, 512, 0.01 * n) for n in (1, 2, 4, 8)], "2 distinct length"),
        ([PrefillSample(n, 100 * n, 0.01 * n) for n in (1, 2, 3, 4)], "degenerate"),
    ],
)
def test_degenerate_prefill_inputs_raise(samples: list[PrefillSample], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_prefill(samples)


def test_refit_profile_replaces_coefficients_and_source() -> None:
    base = default_profile("A100-80GB", "llama-3.1-8b")
    d_true, p_true = DECODE_TRUE[1], PREFILL_TRUE[1]
    decode = _decode_samples(d_true, 0.0, None)
    prefill = _prefill_samples(p_true, 0.0, None)
    refit = refit_profile(base, prefill, decode)
    assert refit.source == f"fitted:{len(prefill)} prefill + {len(decode)} decode samples"
    assert _as_list(refit.decode) == pytest.approx(_as_list(d_true), rel=1e-6)
    assert _as_list(refit.prefill) == pytest.approx(_as_list(p_true), rel=1e-6)
    assert refit.kv_capacity_bytes == base.kv_capacity_bytes
    assert base.source.startswith("derived:roofline")  # the original is untouched


def test_refit_profile_decode_only_keeps_prefill() -> None:
    base = default_profile("H100-80GB", "mistral-7b")
    refit = refit_profile(base, [], _decode_samples(DECODE_TRUE[0], 0.0, None))
    assert refit.prefill == base.prefill
    assert refit.decode != base.decode
    assert refit.source.startswith("fitted:0 prefill + ")
    with pytest.raises(ValueError, match="both lists are empty"):
        refit_profile(base, [], [])


@pytest.mark.parametrize(
    ("measured", "ideal", "eps"),
    [(500.0, 1000.0, 2.0), (1000.0, 1000.0, 1.0), (1200.0, 1000.0, 1.0), (800.0, 1000.0, 1.25)],
)
def test_fit_inefficiency(measured: float, ideal: float, eps: float) -> None:
    assert fit_inefficiency(measured, ideal) == pytest.approx(eps)


@pytest.mark.parametrize(("measured", "ideal"), [(0.0, 1.0), (1.0, -1.0), (float("inf"), 1.0)])
def test_fit_inefficiency_rejects_bad_throughputs(measured: float, ideal: float) -> None:
    with pytest.raises(ValueError, match="must be finite and > 0"):
        fit_inefficiency(measured, ideal)
