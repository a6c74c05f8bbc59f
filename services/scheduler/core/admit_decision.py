"""The live scheduler's answer to one admission, and the drop reasons a rejection may carry."""

from __future__ import annotations

from dataclasses import dataclass

from services.scheduler.core.live_view import LiveReplica

DROP_REASONS = (
    "no-replica",
    "unavailable",
    "queue-full",
    "replicas-full",
    "deadline-infeasible",
    "deadline-expired",
    "sheddable-saturated",
    "shed-for-critical",
)
"""The drop reasons a rejection may carry (AdmitReply.drop_reason)."""


@dataclass(frozen=True, slots=True)
class AdmitDecision:
    admitted: bool
    replica: LiveReplica | None
    reason: str = ""
    retry_after_s: float = 0.0
    stack: str = ""
    """The stack that decided (the scheduler's `stack` argument)."""
    queued: bool = False
    """Admitted into the policy's queue; the replica comes with a later dispatch."""
    drop_reason: str = ""
    """Why it was rejected, one of DROP_REASONS ("" when admitted)."""
