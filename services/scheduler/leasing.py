"""The scheduler's shell of admission leases (core/leases.py): Lease, Place and Sync.

`Lease` answers an ingress replica with its grant: per replica, the cumulative number of
placements it may make on its own (credits only while the cluster has headroom). `Place` is an
ingress telling of a placement it made on a credit: the request is recorded in the admission
core and the policy's books (AdmissionCore.place_leased) under a `grouping` span of the
request's trace (attribute `slomesh.fast_path`), and the answer is a new grant.

`Sync` is how ingresses talk to the scheduler off the request path: one call carries every
placement and completion report an ingress replica collected for this shard since its last
call (services/ingress/shard_outbox.py), run here in their order, and is answered with one
grant. A Serve handle call costs the scheduler about a millisecond of CPU whatever it carries,
ten times the bookkeeping of one placement or report, so one call per batch instead of two per
request is most of the scheduler's CPU per admission.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from services.scheduler.admission_counts import AdmissionCounts
from services.scheduler.args import with_length_hint
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.autoscale.live import ScalingSignals
from services.scheduler.core.leases import LeaseBook, LeaseConfig
from services.scheduler.own_server import OwnServer
from shared.domain import Request
from shared.rpc.invalid_argument import InvalidMessage, request_or_refuse
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2
from shared.telemetry import context_from, incoming_context


class LeaseDesk:
    def __init__(
        self,
        core: AdmissionCore,
        config: LeaseConfig,
        pooled: set[str],
        scaling: ScalingSignals,
        tracer: Any,
        counts: AdmissionCounts,
    ) -> None:
        self.core = core
        self.book = LeaseBook(config)
        self.epoch = uuid.uuid4().hex[:16]
        """This scheduler process: ingresses start their counts again on a new one."""
        self._pooled = frozenset(pooled)
        self._scaling = scaling
        self._tracer = tracer
        self.counts = counts
        """The scheduler's admission counters (placements told of count as the fast path)."""

    def grant(self, ingress_id: str) -> scheduler_pb2.LeaseGrant:
        core = self.core
        limits = self.book.offer(
            ingress_id,
            core.replicas.values(),
            core.queued,
            core.max_in_flight,
            self._pooled,
            core.policy.supports_leases,
            time.time(),
        )
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
        """Record `req` (the notice's request, already checked) on the replica it names; the
        ingress's new grant."""
        self.record(notice, req, parent)
        return self.grant(notice.ingress_id)

    def record(self, notice: scheduler_pb2.PlaceNotice, req: Request, parent: Any) -> None:
        """Record `req` (the notice's request, already checked) on the replica it names."""
        app = notice.replica.application
        with self._tracer.start_as_current_span("grouping", context=parent) as span:
            now = time.time()
            self._scaling.arrival(req, now)
            recorded = self.core.place_leased(req, app, now)
            self.book.noticed(notice.ingress_id, app)
            self.counts.placed(app, fast_path=True)
            if span.is_recording():
                span.set_attribute("slomesh.fast_path", True)
                span.set_attribute("slomesh.stack", self.core.stack)
                span.set_attribute("slomesh.admitted", True)
                span.set_attribute("slomesh.replica", app)
                span.set_attribute("slomesh.recorded", recorded)


class LeaseRpc(OwnServer):
    """The lease RPCs, mixed into SchedulerDeployment, whose attributes it uses; ingresses
    call them (Sync above all) on the scheduler's own gRPC server (own_server.py)."""

    leases: LeaseDesk

    def _start_reconciler(self) -> None: ...

    def _dispatch(self) -> None: ...

    def _write_rwt_log(self) -> None: ...

    def _take_report(self, request: scheduler_pb2.CompletionReport) -> None: ...

    async def Lease(
        self,
        request: scheduler_pb2.LeaseRequest,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.LeaseGrant:
        """Credits of the fast path for one ingress replica."""
        require_mesh_credential(grpc_context, "scheduler.Lease")
        self._start_reconciler()
        return self.leases.grant(request.ingress_id)

    async def Place(
        self,
        request: scheduler_pb2.PlaceNotice,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.LeaseGrant:
        """An ingress placed a request on a credit: record it, answer a new grant."""
        require_mesh_credential(grpc_context, "scheduler.Place")
        self._start_reconciler()
        req = with_length_hint(
            request_or_refuse(request.admit.meta, grpc_context, "scheduler.Place"),
            request.admit.prediction,
        )
        grant = self.leases.place(request, req, incoming_context(grpc_context, trace_headers))
        self._dispatch()
        return grant

    async def Sync(
        self,
        request: scheduler_pb2.SyncBatch,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.LeaseGrant:
        """An ingress's placements and reports in their order (module docstring), then its new
        grant. A placement whose metadata breaks a domain rule is skipped, not the batch."""
        require_mesh_credential(grpc_context, "scheduler.Sync")
        self._start_reconciler()
        self.leases.counts.synced()
        for item in request.items:
            if item.WhichOneof("work") == "report":
                self._take_report(item.report)
                continue
            notice = item.place
            try:
                req = request_or_refuse(notice.admit.meta, None, "scheduler.Sync")
            except InvalidMessage:
                continue
            req = with_length_hint(req, notice.admit.prediction)
            parent = context_from(item.trace_headers) if item.trace_headers else None
            self.leases.record(notice, req, parent)
        self._dispatch()
        self._write_rwt_log()
        return self.leases.grant(request.ingress_id)
