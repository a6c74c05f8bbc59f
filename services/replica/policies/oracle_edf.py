"""Clairvoyant reference order (used by the `oracle` stack, not a product policy).

Three tiers, EDF inside each: (0) requests whose TTFT is still at stake and still attainable;
(1) requests that already have their first token (only their TPOT/E2E remain); (2) requests whose
TTFT deadline has already passed (lost: serving them first would only make others late too).
With `evict_for_waiting`, an urgent head preempts tier-1/2 running work when KV memory is short.
"""

from __future__ import annotations

from services.replica.core.sequence import Sequence
from services.replica.policies.base import QueuePolicy


class OracleEDFPolicy(QueuePolicy):
    name = "oracle-edf"
    evict_for_waiting = True

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        r = seq.request
        deadline = r.ttft_deadline_abs_s
        if seq.first_token_s is not None:
            e2e = r.arrival_s + r.slo.e2e_deadline_s if r.slo.e2e_deadline_s else deadline
            return (1.0, e2e, r.arrival_s)
        if now_s > deadline:
            return (2.0, deadline, r.arrival_s)
        return (0.0, deadline, r.arrival_s)

    def requeue_key(self, seq: Sequence, now_s: float) -> tuple[float, ...] | None:
        new = self.key(seq, now_s)
        return new if new != seq.key else None
