"""VBS-based admission control, the TPOT guard (SCORPIO §3.4, eq. 8).

With credit batching a request of TRP t runs in a fraction t of the iterations, so it loads the
engine like t of a request. The virtual batch size of R' = R ∪ {w}, TRP recomputed over R', is
    VBS(R') = Σ_{r∈R'} TRP(r)                                                   (eq. 8)
and w is admitted iff
    safety · EstimatedTPOT(VBS(R'), L_avg(R')) <= margin · min_{r∈R'} STP(r)
where L_avg is the mean context (input + predicted output / 2). safety (1.3) and margin (0.99)
follow SCORPIO's reference code. A tighter candidate lowers the limit for everyone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from services.replica.core.scorpio.tpot_model import TPOTModel
from services.replica.core.scorpio.trp import trp


@dataclass(frozen=True, slots=True)
class Candidate:
    """A request as the TPOT guard sees it: its STP and context (input + predicted output/2)."""

    stp_s: float
    context_tokens: float


def virtual_batch_size(stps: Sequence[float]) -> float:
    """VBS = Σ TRP over the given STPs (TRP relative to their minimum); 0.0 for none."""
    return math.fsum(trp(stps))


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """Outcome of one admission check; reason is "" when admitted."""

    admit: bool
    estimated_tpot_s: float
    limit_s: float
    virtual_batch: float
    reason: str


class VBSAdmission:
    """Admits a candidate only if the estimated TPOT at VBS(R') fits the tightest STP of R'."""

    def __init__(
        self, model: TPOTModel, safety_factor: float = 1.3, slo_margin: float = 0.99
    ) -> None:
        if not (math.isfinite(safety_factor) and safety_factor > 0):
            raise ValueError(f"safety_factor must be finite and > 0, got {safety_factor!r}")
        if not (math.isfinite(slo_margin) and 0 < slo_margin <= 1):
            raise ValueError(f"slo_margin must be in (0, 1], got {slo_margin!r}")
        self._model = model
        self._safety_factor = safety_factor
        self._slo_margin = slo_margin

    def decide(self, running: Sequence[Candidate], candidate: Candidate) -> AdmissionDecision:
        """Check whether admitting `candidate` next to `running` keeps every TPOT SLO."""
        group = [*running, candidate]
        for i, c in enumerate(group):
            if not (math.isfinite(c.context_tokens) and c.context_tokens >= 0):
                raise ValueError(
                    f"context_tokens of request {i} must be finite and >= 0, "
                    f"got {c.context_tokens!r}"
                )
        stps = [c.stp_s for c in group]
        vbs = virtual_batch_size(stps)
        mean_context = math.fsum(c.context_tokens for c in group) / len(group)
        estimate = self._safety_factor * self._model.estimate_s(vbs, mean_context)
        tightest = min(stps)
        limit = self._slo_margin * tightest
        admit = estimate <= limit
        reason = (
            ""
            if admit
            else (
                f"rejected by the TPOT guard: estimated TPOT {estimate:.4f} s "
                f"(safety factor {self._safety_factor:g}, virtual batch {vbs:.3f}, "
                f"mean context {mean_context:.0f} tokens) exceeds the limit {limit:.4f} s "
                f"({self._slo_margin:g} × tightest STP {tightest:.4f} s)"
            )
        )
        return AdmissionDecision(
            admit=admit,
            estimated_tpot_s=estimate,
            limit_s=limit,
            virtual_batch=vbs,
            reason=reason,
        )
