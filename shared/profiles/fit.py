"""Refit step-time coefficients from measured steps (shared/README.md, "Hardware profile").

Both estimators are bilinear in (N, L): time = c1·N·L + c2·N + c3·L + c4 with N the batch size
and L the (padded) prompt length for prefill or the mean context for decode. The coefficients are
times and must not be negative, so they are fitted by non-negative least squares
(scipy.optimize.nnls) on the design matrix [N·L, N, L, 1].

Weighting: each row (and its measured time) is divided by the measured time, i.e. the fit
minimises the sum of squared *relative* errors. Step times span 2-3 orders of magnitude (a
batch-1 decode of ~10 ms next to a packed prefill of seconds) and timing noise is roughly
proportional to the step, so unweighted least squares would let the longest steps decide the
small coefficients (p2, p3, d4) and get them badly wrong. The reported rmse_s and r2 are computed
on the plain, unweighted residuals in seconds.

Conditioning: columns are scaled to unit max before solving (they span ~6 orders of magnitude)
and the solution is scaled back, which does not change its non-negativity.

Identifiability: 4 coefficients need at least 4 samples, at least 2 distinct N and 2 distinct L,
and N and L varied independently (samples with L a linear function of N leave the design
rank-deficient). Each failure raises ValueError saying which.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs

N_COEFFS = 4

C = TypeVar("C", PrefillCoeffs, DecodeCoeffs)


@dataclass(frozen=True, slots=True)
class PrefillSample:
    """One measured prefill step: n requests packed/padded to `length` tokens took time_s."""

    n: int
    length: int
    time_s: float


@dataclass(frozen=True, slots=True)
class DecodeSample:
    """One measured decode step: n sequences with mean context `context` tokens took time_s."""

    n: int
    context: float
    time_s: float


@dataclass(frozen=True, slots=True)
class FitResult(Generic[C]):
    """Fitted coefficients with the fit's RMSE (seconds), R² and number of samples used.

    r2 is 1 − SS_res/SS_tot; when every measured time is equal (SS_tot = 0) it is 1.0 for an
    exact fit (to rounding) and 0.0 otherwise.
    """

    coeffs: C
    rmse_s: float
    r2: float
    samples: int


def _check_sample(kind: str, i: int, n: int, x: float, time_s: float, x_name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{kind} sample {i}: n must be an int >= 1, got {n!r}")
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{kind} sample {i}: {x_name} must be finite and >= 0, got {x!r}")
    if not (math.isfinite(time_s) and time_s > 0):
        raise ValueError(f"{kind} sample {i}: time_s must be finite and > 0, got {time_s!r}")


def _bilinear_nnls(
    kind: str, n: NDArray[np.float64], x: NDArray[np.float64], y: NDArray[np.float64], x_name: str
) -> tuple[NDArray[np.float64], float, float]:
    """Fit y ≈ c1·n·x + c2·n + c3·x + c4 with c >= 0 (relative errors); returns (c, rmse, r2)."""
    k = len(y)
    if k < N_COEFFS:
        raise ValueError(
            f"{kind} fit needs at least {N_COEFFS} samples (one per coefficient), got {k}"
        )
    if len(np.unique(n)) < 2:
        raise ValueError(f"{kind} samples need at least 2 distinct batch sizes")
    if len(np.unique(x)) < 2:
        raise ValueError(f"{kind} samples need at least 2 distinct {x_name} values")
    design = np.column_stack([n * x, n, x, np.ones(k)])
    scale = np.abs(design).max(axis=0)
    scaled = design / scale
    rank = int(np.linalg.matrix_rank(scaled))
    if rank < N_COEFFS:
        raise ValueError(
            f"{kind} design matrix [N·L, N, L, 1] is degenerate (rank {rank} < {N_COEFFS}): "
            f"vary batch size and {x_name} independently, not along a line"
        )
    weighted = scaled / y[:, None]  # relative errors: row i divided by its measured time
    solution, _ = nnls(weighted, np.ones(k))
    coeffs = np.asarray(solution, dtype=np.float64) / scale
    resid = y - design @ coeffs
    ss_res = float(resid @ resid)
    rmse = math.sqrt(ss_res / k)
    centred = y - y.mean()
    ss_tot = float(centred @ centred)
    if ss_tot > 0:
        return coeffs, rmse, 1.0 - ss_res / ss_tot
    exact = ss_res <= 1e-20 * float(y @ y)
    return coeffs, rmse, 1.0 if exact else 0.0


def fit_prefill(samples: Sequence[PrefillSample]) -> FitResult[PrefillCoeffs]:
    """Fit T_prefill(N, L) = p1·N·L + p2·N + p3·L + p4 (all >= 0) to measured prefill steps."""
    for i, s in enumerate(samples):
        _check_sample("prefill", i, s.n, s.length, s.time_s, "length")
    n = np.array([s.n for s in samples], dtype=np.float64)
    x = np.array([s.length for s in samples], dtype=np.float64)
    y = np.array([s.time_s for s in samples], dtype=np.float64)
    c, rmse, r2 = _bilinear_nnls("prefill", n, x, y, "length")
    coeffs = PrefillCoeffs(p1=float(c[0]), p2=float(c[1]), p3=float(c[2]), p4=float(c[3]))
    return FitResult(coeffs=coeffs, rmse_s=rmse, r2=r2, samples=len(samples))


def fit_decode(samples: Sequence[DecodeSample]) -> FitResult[DecodeCoeffs]:
    """Fit tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4 (all >= 0) to measured decode steps."""
    for i, s in enumerate(samples):
        _check_sample("decode", i, s.n, s.context, s.time_s, "context")
    n = np.array([s.n for s in samples], dtype=np.float64)
    x = np.array([s.context for s in samples], dtype=np.float64)
    y = np.array([s.time_s for s in samples], dtype=np.float64)
    c, rmse, r2 = _bilinear_nnls("decode", n, x, y, "context")
    coeffs = DecodeCoeffs(d1=float(c[0]), d2=float(c[1]), d3=float(c[2]), d4=float(c[3]))
    return FitResult(coeffs=coeffs, rmse_s=rmse, r2=r2, samples=len(samples))


def refit_profile(
    profile: HardwareProfile,
    prefill_samples: Sequence[PrefillSample],
    decode_samples: Sequence[DecodeSample],
) -> HardwareProfile:
    """A copy of `profile` with coefficients refitted from measurements.

    An empty sample list keeps that phase's existing coefficients (e.g. decode-only profiling);
    both empty is a ValueError. Memory, links and inefficiency are kept as they are.
    source becomes "fitted:<n> prefill + <m> decode samples".
    """
    if not prefill_samples and not decode_samples:
        raise ValueError("refit_profile needs prefill or decode samples; both lists are empty")
    prefill = fit_prefill(prefill_samples).coeffs if prefill_samples else profile.prefill
    decode = fit_decode(decode_samples).coeffs if decode_samples else profile.decode
    return dataclasses.replace(
        profile,
        prefill=prefill,
        decode=decode,
        source=f"fitted:{len(prefill_samples)} prefill + {len(decode_samples)} decode samples",
    )


def fit_inefficiency(measured_throughput_tok_s: float, ideal_throughput_tok_s: float) -> float:
    """ε = ideal / measured throughput, floored at 1 (QLM Eqs. 4 and 15, Θ = B / (d·ε)).

    A measurement above the ideal (the model was pessimistic) gives ε = 1, not below.
    """
    for name, v in (
        ("measured_throughput_tok_s", measured_throughput_tok_s),
        ("ideal_throughput_tok_s", ideal_throughput_tok_s),
    ):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be finite and > 0, got {v!r}")
    return max(1.0, ideal_throughput_tok_s / measured_throughput_tok_s)
