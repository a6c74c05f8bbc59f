"""Sheddable work goes first under saturation (bands; fairness/config.py, `shed`).

Two rules, both answering the shed request at once (a rejection the caller turns into 429 +
Retry-After with the drop reason "sheddable-saturated" or "shed-for-critical"):
  - at arrival, a sheddable request (criticality < 0) is shed when more critical work waits in
    the global queue (the engines' pull windows are full, and bands serve that work first), or
    when the shortest predicted backlog of the instances serving its model exceeds
    `shed_backlog_factor` x its TTFT SLO;
  - when a standard or critical arrival stays queued (the engines' windows are full), or the RWT
    estimator predicts a standard or critical group late, every queued sheddable request is
    dropped (bands would serve it only after that work); if only sheddable groups are predicted
    late, those groups are dropped (they would miss anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from services.scheduler.core.cluster_view import InstanceView, Rejector
from services.scheduler.core.fairness.config import TenancyConfig
from services.scheduler.core.qlm.estimates import QueueEstimator
from services.scheduler.core.qlm.groups import Grouper, RequestGroup
from shared.domain import Request

SHED_AT_ARRIVAL = "shed: sheddable request under saturation"
SHED_FROM_QUEUE = "shed: sheddable request dropped from the queue"


class Shedding:
    def __init__(
        self,
        cfg: TenancyConfig,
        grouper: Grouper,
        estimator: QueueEstimator,
        instances: Mapping[str, InstanceView],
        drop: Callable[[str], None],
    ) -> None:
        self.cfg = cfg
        self.grouper = grouper
        self.estimator = estimator
        self.instances = instances
        self._drop = drop
        self.at_arrival = 0
        self.from_queue = 0
        self.expired = 0

    def reject_at_arrival(self, request: Request, rejector: Rejector, now_s: float) -> bool:
        """Shed `request` now if it is sheddable and the system saturated; True if shed."""
        if not (self.cfg.shed and request.sheddable) or not self._saturated(request, now_s):
            return False
        self.at_arrival += 1
        rejector.reject(
            request,
            f"{SHED_AT_ARRIVAL} (criticality {request.criticality}): more critical work is "
            f"queued, or the queue ahead cannot drain within its "
            f"{request.slo.ttft_deadline_s:g}s TTFT SLO",
            now_s,
        )
        return True

    def _saturated(self, request: Request, now_s: float) -> bool:
        if any(g.size and g.criticality > request.criticality for g in self.grouper.groups()):
            return True
        names = [n for n, i in self.instances.items() if i.serves(request.model)]
        backlog = min((self.estimator.backlog_s(n, now_s) for n in names), default=0.0)
        return backlog > self.cfg.shed_backlog_factor * request.slo.ttft_deadline_s

    def on_late(self, late_ids: Iterable[str], rejector: Rejector | None, now_s: float) -> None:
        """Groups predicted late: shed queued sheddable work (module docstring)."""
        late = [g for gid in late_ids if (g := self._group(gid)) is not None]
        if any(g.criticality >= 0 for g in late):
            self.shed_queued(rejector, now_s)
        elif late:
            self.shed_queued(rejector, now_s, only=late)

    def shed_queued(
        self, rejector: Rejector | None, now_s: float, only: list[RequestGroup] | None = None
    ) -> None:
        """Every queued sheddable request (of the groups `only`, when given) leaves the queue
        and is answered at once."""
        if not self.cfg.shed or rejector is None:
            return
        groups = self.grouper.groups() if only is None else only
        victims = [request for g in groups if g.criticality < 0 for request, _ in g.queue]
        for request in victims:
            self._drop(request.request_id)
            self.from_queue += 1
            rejector.reject(
                request,
                f"{SHED_FROM_QUEUE} (criticality {request.criticality}) for more critical "
                "work predicted late",
                now_s,
            )

    def expire_late(self, rejector: Rejector | None, now_s: float) -> None:
        """With tenancy contended (fairness/config.py, `expire_late`): queued requests whose TTFT
        deadline has passed leave the queue answered (rejected) instead of being served late,
        as the live admission core answers them (AdmissionCore.expire_queued). Members of a
        group share their TTFT SLO and are FCFS, so the late ones are at each group's head."""
        if not self.cfg.expire_late or rejector is None:
            return
        late: list[Request] = []
        for g in self.grouper.groups():
            for request, _ in g.queue:
                if request.ttft_deadline_abs_s > now_s:
                    break
                late.append(request)
        for request in late:
            self._drop(request.request_id)
            self.expired += 1
            rejector.reject(
                request, "overloaded: TTFT deadline cannot be met from the queue", now_s
            )

    def _group(self, group_id: str) -> RequestGroup | None:
        try:
            return self.grouper.group(group_id)
        except KeyError:
            return None
