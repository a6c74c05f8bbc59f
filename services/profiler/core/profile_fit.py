"""A HardwareProfile fitted from a sweep's measurements, with its report.

The prefill and decode coefficients (shared/README.md) come from shared.profiles.fit (NNLS on
relative errors). Each sweep point enters the fit once, with the MEDIAN of its step times
(DECISION: the profiler shares a 2-core machine with other work, and contention only ever adds
time in bursts; the median of a point's repeats ignores a burst that a mean would smear into
every coefficient). A decode point's median is paired with the mean context of its timed steps
(step k runs at context l + k; the step time is linear in the context, so the two agree).
Memory and link figures (KV capacity, bytes per token, weights, swap and load bandwidths) are
measured by the engine driver and passed in as `EngineFacts`; ε comes from inefficiency.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from services.profiler.core.inefficiency import (
    IdealEngineFactory,
    InefficiencyReport,
    measure_inefficiency,
)
from services.profiler.core.runner import SweepMeasurements
from shared.domain import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles import DecodeSample, FitResult, PrefillSample, fit_decode, fit_prefill


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What the driver read or measured about the engine besides step times."""

    gpu: str
    """Device name ("cpu", or a catalog GPU name such as "A100-80GB")."""
    model: str
    """Served model name."""
    tensor_parallel: int
    kv_capacity_bytes: int
    """KV cache the engine allocated (blocks x block size x kv_bytes_per_token)."""
    kv_bytes_per_token: int
    """2 · layers · kv_heads · head_dim · dtype bytes."""
    weight_bytes: int
    """Bytes of the loaded parameters."""
    swap_bytes_s: float
    """Measured host<->device copy bandwidth (host<->host on CPU)."""
    cold_load_bytes_s: float
    """weight_bytes / measured engine start-up time."""


@dataclass(frozen=True, slots=True)
class FittedProfile:
    """The fitted profile, its fits and ε, and a JSON-able report for the profile file."""

    profile: HardwareProfile
    prefill_fit: FitResult[PrefillCoeffs]
    decode_fit: FitResult[DecodeCoeffs]
    inefficiency: InefficiencyReport | None
    report: dict[str, Any]


def samples(
    measurements: SweepMeasurements,
) -> tuple[list[PrefillSample], list[DecodeSample]]:
    """One fit sample per sweep point: its median step time (module docstring)."""
    prefill = [
        PrefillSample(m.point.n, m.point.length, m.median_s)
        for m in measurements.prefill
        if m.times_s
    ]
    decode = [
        DecodeSample(m.point.n, m.point.mean_context, m.median_s)
        for m in measurements.decode
        if m.times_s
    ]
    return prefill, decode


def _fit_dict(
    fit: FitResult[Any], names: tuple[str, ...], points: list[dict[str, Any]]
) -> dict[str, Any]:
    coeffs = [getattr(fit.coeffs, n) for n in names]
    worst = max((abs(p["predicted_s"] / p["median_s"] - 1) for p in points), default=0.0)
    return {
        "coeffs_s": dict(zip(names, coeffs, strict=True)),
        "rmse_s": fit.rmse_s,
        "r2": fit.r2,
        "max_rel_error": worst,
        "points": fit.samples,
    }


def _points(
    measurements: SweepMeasurements, pre: PrefillCoeffs, dec: DecodeCoeffs
) -> dict[str, list[dict[str, Any]]]:
    """Every point's median step time next to what the fitted coefficients predict."""
    return {
        "prefill": [
            {
                "n": m.point.n,
                "length": m.point.length,
                "median_s": m.median_s,
                "predicted_s": pre.time_s(m.point.n, m.point.length),
                "runs": len(m.times_s),
            }
            for m in measurements.prefill
            if m.times_s
        ],
        "decode": [
            {
                "n": m.point.n,
                "context": m.point.context,
                "mean_context": m.point.mean_context,
                "median_s": m.median_s,
                "predicted_s": dec.time_s(m.point.mean_context, m.point.n),
                "steps_timed": len(m.times_s),
            }
            for m in measurements.decode
            if m.times_s
        ],
    }


def fit_sweep(
    measurements: SweepMeasurements,
    facts: EngineFacts,
    engine: str,
    ideal_engine: IdealEngineFactory,
) -> FittedProfile:
    """Fit the profile of `facts.model` on `facts.gpu` from the sweep (module docstring).

    engine names what was measured ("vllm", "simulated") in the profile's source.
    """
    pre_samples, dec_samples = samples(measurements)
    pre = fit_prefill(pre_samples)
    dec = fit_decode(dec_samples)
    profile = HardwareProfile(
        gpu=facts.gpu,
        model=facts.model,
        tensor_parallel=facts.tensor_parallel,
        prefill=pre.coeffs,
        decode=dec.coeffs,
        kv_capacity_bytes=facts.kv_capacity_bytes,
        kv_bytes_per_token=facts.kv_bytes_per_token,
        weight_bytes=facts.weight_bytes,
        swap_bytes_s=facts.swap_bytes_s,
        cold_load_bytes_s=facts.cold_load_bytes_s,
        inefficiency=1.0,
        source=f"fitted:{engine} sweep ({pre.samples} prefill + {dec.samples} decode points)",
    )
    eff: InefficiencyReport | None = None
    mixed = measurements.mixed
    if mixed is not None:
        eff = measure_inefficiency(
            profile, measurements.plan.mixed, mixed, measurements.plan.limits, ideal_engine
        )
        profile = dataclasses.replace(profile, inefficiency=eff.epsilon)
    points = _points(measurements, pre.coeffs, dec.coeffs)
    report: dict[str, Any] = {
        "engine": engine,
        "fit": {
            "prefill": _fit_dict(pre, ("p1", "p2", "p3", "p4"), points["prefill"]),
            "decode": _fit_dict(dec, ("d1", "d2", "d3", "d4"), points["decode"]),
        },
        "inefficiency": dataclasses.asdict(eff) if eff is not None else None,
        "limits": dataclasses.asdict(measurements.plan.limits),
        "points": points,
        "engine_clock_s": {"sweep": measurements.sweep_s, "inefficiency_run": measurements.mixed_s},
        "timings_s": {},
    }
    return FittedProfile(profile, pre, dec, eff, report)
