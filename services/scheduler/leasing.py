"""The scheduler's shell of admission leases (core/leases.py): Lease and Place.

`Lease` answers an ingress replica with its grant: per replica, the cumulative number of
placements it may make on its own (credits only while the cluster has headroom). `Place` is an
ingress telling of a placement it made on a credit: the request is recorded in the admission
core and the policy's books (AdmissionCore.place_leased) under a `grouping` span of the
request's trace (attribute `slomesh.fast_path`), and the answer is a new grant.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.autoscale.live import ScalingSignals
from services.scheduler.core.leases import LeaseBook, LeaseConfig, free_seats
from shared.domain import Request
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2


class LeaseDesk:
    def __init__(
        self,
        core: AdmissionCore,
        config: LeaseConfig,
        pooled: set[str],
        scaling: ScalingSignals,
        tracer: Any,
    ) -> None:
        self.core = core
        self.book = LeaseBook(config)
        self.epoch = uuid.uuid4().hex[:16]
        """This scheduler process: ingresses start their counts again on a new one."""
        self._pooled = frozenset(pooled)
        self._scaling = scaling
        self._tracer = tracer
        self.placed = 0
        """Placements told of by ingresses (fast path) since start."""

    def grant(self, ingress_id: str) -> scheduler_pb2.LeaseGrant:
        now = time.time()
        enabled = self.book.config.enabled and self.core.policy.supports_leases
        free = free_seats(
            self.core.replicas.values(), self.core.queued, self.core.max_in_flight, self._pooled
        )
        if not enabled:
            free = dict.fromkeys(free, 0)
        limits = self.book.grant(ingress_id, free, now)
        credits = [
            scheduler_pb2.ReplicaCredit(
                replica=common_pb2.ReplicaRef(application=app, gpu=rep.gpu, model=rep.model),
                limit=limits[app],
            )
            for app, rep in self.core.replicas.items()
            if app in limits
        ]
        return scheduler_pb2.LeaseGrant(
            epoch=self.epoch, credits=credits, ttl_s=self.book.config.ttl_ms / 1e3
        )

    def place(
        self, notice: scheduler_pb2.PlaceNotice, req: Request, parent: Any
    ) -> scheduler_pb2.LeaseGrant:
        """Record `req` (the notice's request, already checked) on the replica it names."""
        app = notice.replica.application
        with self._tracer.start_as_current_span("grouping", context=parent) as span:
            now = time.time()
            self._scaling.arrival(req, now)
            recorded = self.core.place_leased(req, app, now)
            self.book.noticed(notice.ingress_id, app)
            self.placed += 1
            span.set_attribute("slomesh.fast_path", True)
            span.set_attribute("slomesh.policy", self.core.policy_label)
            span.set_attribute("slomesh.admitted", True)
            span.set_attribute("slomesh.replica", app)
            span.set_attribute("slomesh.recorded", recorded)
        return self.grant(notice.ingress_id)
