"""TPOT estimator of the SCORPIO admission check (SCORPIO §3.4, eq. 8; see shared/README.md).

SCORPIO estimates the time of one decode iteration with the bilinear decode model (SCLS §4.2–4.3),
tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4, evaluated at N = the virtual batch size
VBS(R') = Σ TRP(r) (a fractional batch: looser requests only run part of the time) and
l = L_avg(R'), the mean context (input + predicted output / 2). The coefficients are fitted by
the shared non-negative least-squares fit (shared.profiles.fit.fit_decode).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.domain.profile import DecodeCoeffs
from shared.profiles.fit import DecodeSample, FitResult, fit_decode


class TPOTModel(Protocol):
    """Anything that estimates seconds per output token at a (virtual) batch size and context."""

    def estimate_s(self, virtual_batch: float, mean_context: float) -> float:
        """Estimated TPOT in seconds for `virtual_batch` requests of `mean_context` tokens."""
        ...


@dataclass(frozen=True, slots=True)
class DecodeTPOTModel:
    """TPOT = d1·VBS·ctx + d2·VBS + d3·ctx + d4 (the §1 decode model with N := VBS)."""

    coeffs: DecodeCoeffs

    def estimate_s(self, virtual_batch: float, mean_context: float) -> float:
        c = self.coeffs
        return (
            c.d1 * virtual_batch * mean_context + c.d2 * virtual_batch + c.d3 * mean_context + c.d4
        )


def fit_tpot_model(
    samples: Sequence[DecodeSample],
) -> tuple[DecodeTPOTModel, FitResult[DecodeCoeffs]]:
    """Fit the decode model to measured decode steps; returns the model and the fit's report.

    Raises ValueError (from fit_decode) when the samples cannot identify the 4 coefficients.
    """
    result = fit_decode(samples)
    return DecodeTPOTModel(coeffs=result.coeffs), result


@dataclass(frozen=True, slots=True)
class PrefillInterferenceTPOTModel:
    """A decode model plus the prefill work that shares the iterations (DECISION, ours).

    Under chunked prefill every admitted request's prompt is computed inside the decode steps,
    so a step lasts tau_decode plus its share of prefill. In steady state requests start as fast
    as they finish: VBS / O_avg per iteration (a request of TRP r needs O/r iterations), each
    bringing P(I_avg) seconds of prefill, so
        TPOT ≈ tau_decode(VBS, L) + VBS · P(I_avg) / O_avg.
    Without this term the admission check ignored up to half of the step time at high load.
    """

    decode: TPOTModel
    prefill_s_per_request: float
    """P(I_avg): prefill time of one average prompt, without the step's fixed cost."""
    mean_output_tokens: float
    """O_avg: output tokens per request (measured from finished requests)."""

    def estimate_s(self, virtual_batch: float, mean_context: float) -> float:
        share = virtual_batch * self.prefill_s_per_request / max(1.0, self.mean_output_tokens)
        return self.decode.estimate_s(virtual_batch, mean_context) + share
