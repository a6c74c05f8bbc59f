"""Clairvoyant reference order (used by the `oracle` stack, not a product policy).

EDF on the TTFT deadline, with two refinements a real scheduler cannot fully make:
- a waiting request whose TTFT deadline has already passed without a first token is demoted
  behind every request that can still make it (it is lost; serving it first makes others late);
- with `evict_for_waiting`, a waiting head with an earlier deadline preempts running requests of
  looser deadlines when KV memory is short (QLM's eviction, with the KV swapped to host memory
  when that is cheaper than recompute).
Running requests keep their own deadline as priority, so work in progress is never starved by
newer, looser arrivals.
"""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.sequence import Sequence


class OracleEDFPolicy(QueuePolicy):
    name = "oracle-edf"
    deadline_ordered = True
    evict_for_waiting = True

    def key(self, seq: Sequence, now_s: float) -> tuple[float, ...]:
        r = seq.request
        deadline = r.ttft_deadline_abs_s
        lost = seq.first_token_s is None and now_s > deadline
        return (1.0 if lost else 0.0, deadline, r.arrival_s)

    def requeue_key(self, seq: Sequence, now_s: float) -> tuple[float, ...] | None:
        new = self.key(seq, now_s)
        return new if new != seq.key else None
