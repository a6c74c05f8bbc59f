"""The SCORPIO TPOT estimator: the §1 bilinear decode model with N := virtual batch size."""

from __future__ import annotations

import dataclasses

import pytest

from services.replica.core.scorpio.tpot_model import DecodeTPOTModel, TPOTModel, fit_tpot_model
from shared.domain.profile import DecodeCoeffs
from shared.profiles.fit import DecodeSample


@pytest.mark.parametrize(
    ("coeffs", "vbs", "ctx", "expected"),
    [
        (DecodeCoeffs(1.0, 0.0, 0.0, 0.0), 2.5, 4.0, 10.0),
        (DecodeCoeffs(0.0, 1.0, 0.0, 0.0), 2.5, 4.0, 2.5),
        (DecodeCoeffs(0.0, 0.0, 1.0, 0.0), 2.5, 4.0, 4.0),
        (DecodeCoeffs(0.0, 0.0, 0.0, 1.0), 2.5, 4.0, 1.0),
        (DecodeCoeffs(1e-7, 1e-4, 1e-6, 0.01), 1.75, 2000.0, 0.012525),
    ],
)
def test_estimate_is_bilinear_in_vbs_and_context(
    coeffs: DecodeCoeffs, vbs: float, ctx: float, expected: float
) -> None:
    model: TPOTModel = DecodeTPOTModel(coeffs)
    assert model.estimate_s(vbs, ctx) == pytest.approx(expected, rel=1e-12)


def test_fractional_batch_is_between_integer_batches() -> None:
    model = DecodeTPOTModel(DecodeCoeffs(1e-7, 1e-4, 1e-6, 0.01))
    assert model.estimate_s(1.0, 500.0) < model.estimate_s(1.5, 500.0) < model.estimate_s(2, 500.0)


@pytest.mark.parametrize(
    "true",
    [
        DecodeCoeffs(d1=1e-7, d2=1e-4, d3=1e-6, d4=0.01),
        DecodeCoeffs(d1=3e-8, d2=5e-4, d3=2e-7, d4=0.005),
    ],
)
def test_fit_recovers_known_coefficients(true: DecodeCoeffs) -> None:
    samples = [
        DecodeSample(n=n, context=ctx, time_s=true.time_s(ctx, n))
        for n in (1, 2, 4, 8, 16, 32)
        for ctx in (128.0, 512.0, 1024.0, 2048.0)
    ]
    model, result = fit_tpot_model(samples)
    assert model.coeffs == result.coeffs
    for name in ("d1", "d2", "d3", "d4"):
        got, want = getattr(model.coeffs, name), getattr(true, name)
        assert abs(got - want) / want < 1e-6, name
    assert result.samples == len(samples)
    assert result.r2 == pytest.approx(1.0, abs=1e-9)
    assert model.estimate_s(3.5, 700.0) == pytest.approx(
        true.d1 * 3.5 * 700 + true.d2 * 3.5 + true.d3 * 700 + true.d4, rel=1e-6
    )


def test_fit_with_too_few_samples_raises() -> None:
    samples = [DecodeSample(n=1, context=100.0, time_s=0.01)] * 3
    with pytest.raises(ValueError, match="at least 4 samples"):
        fit_tpot_model(samples)


def test_model_is_frozen() -> None:
    model = DecodeTPOTModel(DecodeCoeffs(0.0, 0.0, 0.0, 1.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.coeffs = DecodeCoeffs(0.0, 0.0, 0.0, 2.0)  # type: ignore[misc]
