"""Typed knobs of the SCORPIO policy (services/replica/README.md, "SCORPIO").

SCORPIO guards heterogeneous SLOs with three mechanisms, each switchable here: credit-based
batching (C_r += TRP(r); run r when C_r >= 1), VBS admission (admit w iff
safety · EstimatedTPOT(VBS(R'), L_avg(R')) <= margin · min_{r∈R'} STP(r)) and the TTFT guard
(least-deadline-first walk of the waiting queue, rejecting early what cannot make its deadline).
The reference code uses a safety factor of 1.3 and a margin of 0.99; both are configurable.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ScorpioConfig(BaseModel):
    """Switches and constants of the SCORPIO policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    credit_batching: bool = True
    """Credit-based batching: requests with looser TPOT SLOs skip some decode iterations."""
    vbs_admission: bool = True
    """The TPOT guard: admit a request only if the estimated TPOT at the virtual batch size
    stays within the tightest STP of the running set."""
    vbs_untargeted_free: bool = False
    """The TPOT guard guards only TPOT SLOs: a candidate is admitted without a TPOT estimate
    when neither it nor any running request carries a TPOT SLO (a TTFT-only workload is never
    capped). False: requests without one count with `default_tpot_s` as their STP, as in
    SCORPIO's reference code."""
    ttft_guard: bool = True
    """Least-deadline-first early rejection of waiting requests that cannot make their TTFT SLO."""
    tpot_safety_factor: float = Field(1.3, gt=0)
    """Multiplies the estimated TPOT before comparing it with the limit (reference code: 1.3)."""
    tpot_slo_margin: float = Field(0.99, gt=0, le=1)
    """The (safety-scaled) estimate must be <= this margin times the tightest STP."""
    ttft_margin_s: float = Field(0.0, ge=0)
    """Extra seconds by which the predicted first token must beat the TTFT deadline."""
    ttft_deadline_aware: bool = False
    """The guard counts, on an earliest-deadline-first engine queue, only the work due before
    the request (off: the whole backlog)."""
    ttft_bounds_in_flight: bool = False
    """A replica the guard can judge takes requests past the scheduler's in-flight limit: its
    predicted TTFT, not a request count, bounds its queue."""
    default_tpot_s: float = Field(0.2, gt=0)
    """STP (seconds per output token) assumed for requests without a TPOT SLO."""
    credit_epsilon: float = Field(1e-9, ge=0)
    """Tolerance of the credit >= 1 test, absorbing float drift (e.g. 3 × 1/3)."""
    prefill_interference: bool = True
    """Add the prefill work of arriving requests to the TPOT estimate (chunked prefill runs inside
    decode steps); False: the paper's decode-only estimate."""
    prior_output_tokens: int = Field(256, ge=1)
    """Mean output length assumed until the engine has seen requests finish."""
    prior_input_tokens: int = Field(1024, ge=1)
    """Mean prompt length assumed until the engine has seen requests finish."""
