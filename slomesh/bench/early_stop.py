"""A simulator that stops a capacity probe as soon as its verdict is certain (no approximation).

Two criteria, each a question about one probe at one rate:

- `overall`: attainment over all N requests >= target. Certain once ceil(target·N) requests met
  their SLO (attained), or more than N minus that missed (missed).
- `every-class`: attainment of every SLO class c (N_c requests) >= target. Missed as soon as
  one class has more than N_c - ceil(target·N_c) misses; attained once every class has
  ceil(target·N_c) met.

The attainment reported then is a bound on the criterion's figure (overall attainment, or the
lowest class attainment): met / N when attained, 1 - missed / N when missed.

A miss counts as soon as it is certain, not only when the request finishes: once the clock is
past a request's TTFT deadline and it has no first token (never placed, or its sequence on the
instance it was placed on has none yet), its first token can only come later, so its record
will miss (RequestRecord.slo_met compares ttft_s with the deadline the same way). Past capacity
a request may wait long after its deadline before it is served or rejected; its miss now counts
at the deadline. A request whose first token cannot be seen (between two slices of a batch) is
left to its record.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from services.scheduler.core import events as cev
from shared.domain import Request
from shared.metrics.records import RequestRecord
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import StackConfig

Criterion = Literal["overall", "every-class"]
CRITERIA: tuple[Criterion, ...] = ("overall", "every-class")


class Decided(Exception):
    """Raised out of the event loop once a probe's verdict is certain."""

    def __init__(self, attainment: float) -> None:
        super().__init__(attainment)
        self.attainment = attainment


def _need(target: float, n: int) -> int:
    return math.ceil(target * n - 1e-9)


class EarlyStopSimulator(Simulator):
    """A Simulator that raises Decided once the criterion's verdict is certain either way."""

    def __init__(
        self,
        cluster: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        target: float,
        criterion: Criterion = "overall",
    ) -> None:
        super().__init__(cluster, stack, requests)
        if criterion == "overall":
            self._group = {r.request_id: "" for r in self.requests}
        else:
            self._group = {r.request_id: r.slo.class_name for r in self.requests}
        self._n = Counter(self._group.values())
        self._need = {g: _need(target, n) for g, n in self._n.items()}
        self._met: Counter[str] = Counter()
        self._missed: Counter[str] = Counter()
        self._open = set(self._n)
        """Groups whose met count has not reached its need yet."""
        self._by_deadline = sorted(
            self.requests, key=lambda r: (r.arrival_s + r.slo.ttft_deadline_s, r.request_id)
        )
        """Requests in TTFT-deadline order; those before `_next_due` were looked at."""
        self._next_due = 0
        self._counted_late: set[str] = set()
        """Requests counted as missed at their deadline (their records are not counted again)."""

    def decide(self, event: cev.ClusterEvent) -> None:
        super().decide(event)
        self._count_certain_misses(event.now_s)

    def _count_certain_misses(self, now_s: float) -> None:
        order = self._by_deadline
        while self._next_due < len(order):
            r = order[self._next_due]
            if not now_s - r.arrival_s > r.slo.ttft_deadline_s + 1e-9:
                return
            self._next_due += 1
            rid = r.request_id
            if rid in self._records or self._first_token_possible(rid):
                continue
            self._counted_late.add(rid)
            self._count_miss(self._group[rid])

    def _first_token_possible(self, request_id: str) -> bool:
        """Whether `request_id` may have its first token already (so its miss is not certain)."""
        name = self._placement.get(request_id)
        if name is None:
            return False  # never placed: no first token yet
        inst = self.applier.instances.get(name)
        seq = None if inst is None else inst.core.sequence(request_id)
        return seq is None or seq.first_token_s is not None

    def _add_record(self, rec: RequestRecord) -> None:
        super()._add_record(rec)
        if rec.request_id in self._counted_late:
            return
        g = self._group[rec.request_id]
        if rec.slo_met:
            self._met[g] += 1
            if self._met[g] >= self._need[g]:
                self._open.discard(g)
                if not self._open:
                    raise Decided(min(self._met[k] / self._n[k] for k in self._n))
        else:
            self._count_miss(g)

    def _count_miss(self, g: str) -> None:
        self._missed[g] += 1
        if self._missed[g] > self._n[g] - self._need[g]:
            raise Decided(1.0 - self._missed[g] / self._n[g])
