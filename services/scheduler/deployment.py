"""The scheduler deployment: Admit / Report / UpdateReplica over the pure admission core."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import asdict
from typing import Any

from ray import serve
from ray.serve import Application

from services.scheduler.admission_counts import AdmissionCounts
from services.scheduler.args import SchedulerArgs, live_replicas, with_length_hint
from services.scheduler.core.admission import AdmissionCore, AdmitDecision
from services.scheduler.core.autoscale.live import ScalingSignals
from services.scheduler.core.autoscale.wire import encode
from services.scheduler.core.live_view import LiveReplica, ReplicaAction
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.ttft_admission import QueueReport, TTFTAdmission
from services.scheduler.health_events import health_event, swap_event
from services.scheduler.leasing import LeaseDesk, LeaseRpc
from services.scheduler.metrics import SchedulerMetrics
from services.scheduler.report_log import ReportLog
from services.scheduler.shard_member import ShardMember
from services.scheduler.shard_peers import ShardPeers
from shared.domain import Request
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.convert import REPLICA_UNAVAILABLE
from shared.rpc.internal_http import internal_not_found
from shared.rpc.invalid_argument import request_or_refuse
from shared.rpc.mesh_auth import require_mesh_credential, require_mesh_token
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, scheduler_pb2
from shared.telemetry import incoming_context, setup_tracing, tracer


@serve.deployment(max_ongoing_requests=4096, ray_actor_options={"num_cpus": 0.1})
class SchedulerDeployment(ShardMember, LeaseRpc):
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = SchedulerArgs.model_validate(args)
        if self.args.transport == "grpc":  # its calls go through Serve's gRPC proxy
            require_mesh_token("scheduler (transport grpc)")
        setup_tracing("scheduler", self.args.tracing)
        replicas = live_replicas(self.args)
        self.core = AdmissionCore(
            replicas,
            create_global_policy(self.args.policy, self.args.policy_options),
            self.args.stack or self.args.policy,
            self.args.max_in_flight_per_replica,
            self.args.max_queued_requests,
            None if self.args.max_queue_wait_ms is None else self.args.max_queue_wait_ms / 1e3,
        )
        self.core.ttft = TTFTAdmission(self.args.ttft_guard)
        self.report_log = ReportLog(self.args.report_log_file)
        self._waiters: dict[str, asyncio.Future[LiveReplica | tuple[str, str]]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._reconciler: asyncio.Task[None] | None = None
        self._tracer = tracer("scheduler")
        self.states: dict[str, common_pb2.ReplicaState] = {}
        self.client = MeshClient(transport=self.args.transport)
        self._tasks: set[asyncio.Task[None]] = set()
        self._metrics = SchedulerMetrics()  # names as scraped: deploy/grafana/README.md
        self.scaling = ScalingSignals(self.args.autoscale_signal)
        self._pooled = {r.application for r in self.args.replicas if r.pooled}
        self.counts = AdmissionCounts()
        """Admissions since start by path and replica (admission_counts.py; spans are sampled)."""
        self.leases = LeaseDesk(
            self.core, self.args.leases, self._pooled, self.scaling, self._tracer, self.counts
        )
        self.answered: set[str] = set()
        """Replicas that have answered a Status probe since this scheduler started. Until its
        first answer a replica is not ready: no placement, pull or lease credit goes there, and a
        request for a model with no ready replica is refused at once (503, Retry-After)."""
        now = time.time()
        for name in self.core.replicas:
            self.core.set_health(name, False, now)
        self.shards = ShardPeers(
            self.args.shard,
            [(r.application, r.model) for r in self.args.replicas],
            self.client,
            lambda: getattr(getattr(self.core.policy, "selector", None), "vtc", None),
            self._owned_changed,
        )
        """This scheduler as one shard among its peers (shard_peers.py): the replicas it owns
        (the only ones it probes, places and pulls on) and the tenant usage exchange."""
        self._start_reconciler()  # Serve runs the constructor on the replica's event loop

    async def __call__(self, request: Any) -> Any:
        """HTTP on this internal application's route prefix: 404 (shared/rpc/internal_http.py)."""
        return internal_not_found("scheduler")

    async def Admit(
        self,
        request: scheduler_pb2.AdmitRequest,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.AdmitReply:
        require_mesh_credential(grpc_context, "scheduler.Admit")
        self._start_reconciler()  # replica health and lease checks run from the first request
        req = with_length_hint(
            request_or_refuse(request.meta, grpc_context, "scheduler.Admit"), request.prediction
        )
        parent = incoming_context(grpc_context, trace_headers)
        with self._tracer.start_as_current_span("grouping", context=parent) as span:
            resumed = request.resume_output_tokens  # a slice ended: back to the batch pool
            if resumed:
                span.set_attribute("slomesh.resume_output_tokens", resumed)
                decision = self.core.resume_slice(req, resumed, time.time())
            else:
                self.scaling.arrival(req, now := time.time())
                self.report_log.admitted(req, now)  # its hop from the ingress (report_log.py)
                decision = self.core.admit(req, now)
            self._dispatch()
            span.set_attribute("slomesh.stack", decision.stack)
            span.set_attribute("slomesh.admitted", decision.admitted)
            queued = decision.admitted and decision.queued
            if queued:
                self._start_ticker()
                span.set_attribute("slomesh.queued", True)
                if span.is_recording():
                    for key, value in self.core.policy.describe(req.request_id).items():
                        span.set_attribute(key, value)
                replans = getattr(getattr(self.core.policy, "stats", None), "replans", 0)
                decision = await self._wait_for_pull(req, span)
                after = getattr(getattr(self.core.policy, "stats", None), "replans", 0)
                span.set_attribute("slomesh.replans_while_queued", after - replans)
            if not decision.admitted or decision.replica is None:
                self.counts.refusal()
                span.set_attribute("slomesh.reject_reason", decision.reason)
                return scheduler_pb2.AdmitReply(
                    admitted=False,
                    reason=decision.reason,
                    retry_after_s=decision.retry_after_s,
                    stack=decision.stack,
                    drop_reason=decision.drop_reason,
                )
            rep = decision.replica
            self.counts.placed(rep.application, fast_path=False, queued=queued)
            span.set_attribute("slomesh.replica", rep.application)
            span.set_attribute("slomesh.queue_position", len(rep.in_flight) - 1)
            return scheduler_pb2.AdmitReply(
                admitted=True,
                replica=common_pb2.ReplicaRef(
                    application=rep.application, gpu=rep.gpu, model=rep.model
                ),
                stack=decision.stack,
                slice_tokens=self.core.slice_tokens(req.request_id),
            )

    async def Report(
        self,
        request: scheduler_pb2.CompletionReport,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.ReportReply:
        require_mesh_credential(grpc_context, "scheduler.Report")
        self._take_report(request)
        self._dispatch()  # also publishes the in-flight gauges (metrics.py)
        self._write_rwt_log()
        return scheduler_pb2.ReportReply()

    def _take_report(self, request: scheduler_pb2.CompletionReport) -> None:
        """A finished (or failed) request leaves the books (Report, or an item of Sync)."""
        if request.finish_reason == REPLICA_UNAVAILABLE:  # gone: no placements until Status
            self.core.record_probe(request.replica.application, False, time.time(), 1)
        self.scaling.finished(request.meta.model, request.output_tokens)
        self.report_log.add(request, time.time())
        self.core.report(request.meta.request_id, request.output_tokens, time.time())

    def _write_rwt_log(self) -> None:
        """Append the reports taken and the waiting-time predictions scored since the last call."""
        self.report_log.flush()
        tracker = getattr(self.core.policy, "rwt_error", None)
        if self.args.rwt_log_file is None or tracker is None:
            return
        scored = tracker.drain()
        if scored:
            with open(self.args.rwt_log_file, "a") as f:
                f.writelines(json.dumps(asdict(s)) + "\n" for s in scored)

    async def _wait_for_pull(self, req: Request, span: Any) -> AdmitDecision:
        """A queued request waits here until a replica pulls it, its deadline expires or it is
        shed (answered at once with a rejection and its drop reason) or the caller goes away."""
        request_id = req.request_id
        fut: asyncio.Future[LiveReplica | tuple[str, str]] = (
            asyncio.get_running_loop().create_future()
        )
        self._waiters[request_id] = fut
        t0 = time.time()
        try:
            got = await fut
        except asyncio.CancelledError:
            self._waiters.pop(request_id, None)
            self.core.report(request_id, 0, time.time())  # leaves the queue; nothing is lost
            raise
        span.set_attribute("slomesh.queue_wait_ms", (time.time() - t0) * 1e3)
        if isinstance(got, tuple):
            reason, drop = got
            return AdmitDecision(False, None, reason, 1.0, self.core.stack, drop_reason=drop)
        self._metrics.queue_wait(req.criticality, time.time() - t0)
        return AdmitDecision(True, got, stack=self.core.stack)

    def _start_ticker(self) -> None:
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.get_running_loop().create_task(self._tick_loop())

    async def _tick_loop(self) -> None:
        while self.core.queued or self._waiters:
            await asyncio.sleep(self.args.tick_interval_ms / 1e3)
            now = time.time()
            self.core.tick(now)
            self._dispatch()
            expired = self.core.expire_queued(now, self.args.queue_reject_margin_ms / 1e3)
            for rid in expired:
                fut = self._waiters.pop(rid, None)
                if fut is not None and not fut.done():
                    reason = "overloaded: TTFT deadline cannot be met from the queue"
                    fut.set_result((reason, "deadline-expired"))

    def _start_reconciler(self) -> None:
        """Run the Status probes (from the constructor when it runs on an event loop, else from
        the first call)."""
        if self._reconciler is not None and not self._reconciler.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._reconciler = loop.create_task(self._reconcile_loop())
        self.shards.start()

    def ready_models(self) -> list[str]:
        """Models with a replica that has answered a Status probe and answers still."""
        reps = self.core.replicas.values()
        ready = [r for r in reps if r.healthy and r.application in self.answered]
        return sorted({m for r in ready for m in r.models})

    async def _reconcile_loop(self) -> None:
        """Every reconcile interval, ask each replica's Status (in parallel, with a deadline):
        a replica that does not answer is marked unhealthy (no placements or pulls) until it
        answers again; admissions a replica does not hold are released (core/admission.py)."""
        while True:
            await self._probe([n for n in self.core.replicas if n in self.shards.owned])
            await asyncio.sleep(self.args.reconcile_interval_ms / 1e3)

    async def _probe(self, names: list[str]) -> None:
        """One Status probe of each of `names`, in parallel, and what follows from the answers."""
        asked = time.time()
        states = await asyncio.gather(*(self._status(n) for n in names))
        for name, state in zip(names, states, strict=True):
            if name not in self.shards.owned:
                continue  # handed over while the probe ran
            now = time.time()
            if state is not None:
                self.answered.add(name)
            excused, grace = self.core.excused_misses, self.args.swap_grace_factor
            answered = state is not None
            if self.core.record_probe(name, answered, now, self.args.failures_to_unhealthy, grace):
                health_event(self._tracer, "replica.health", name, healthy=answered)
                self._dispatch()
            elif self.core.excused_misses > excused:
                swap_to = self.core.replicas[name].swap_due()
                health_event(self._tracer, "replica.swap_grace", name, swap_to=swap_to)
            stale = self.core.replicas[name].answer_is_stale(asked)  # a push came since
            if state is not None and name not in self._pooled and not stale:
                self._queue_report(name, state)
            if state is None or name in self._pooled:
                continue
            lost = self.core.release_unheld(
                name, set(state.request_ids), now, self.args.admit_lease_ms / 1e3
            )
            if lost:
                self._dispatch()

    def _queue_report(self, application: str, state: common_pb2.ReplicaState) -> None:
        """A replica's queue as the TTFT guard reads it (core/ttft_admission.py), and the
        adapters it holds as adapter-aware placement reads them (core/adapter_affinity.py)."""
        replica = self.core.replicas.get(application)
        if replica is not None:  # a pool's engines may differ in model: its active one is unknown
            active = None if application in self._pooled else state.active_model
            replica.observe(
                active, state.swapping, tuple(state.loaded_adapters), state.deadline_ordered
            )
        report = QueueReport(
            state.waiting,
            state.running,
            state.pending_prefill_tokens,
            time.time(),
            tuple((w.ttft_deadline_unix_s, w.tokens) for w in state.waiting_prefill),
            state.deadline_ordered,
        )
        self.core.ttft.update(application, report)

    async def _status(self, name: str) -> common_pb2.ReplicaState | None:
        query, timeout_s = replica_pb2.StatusQuery(), self.args.status_timeout_ms / 1e3
        try:
            state: common_pb2.ReplicaState = await self.client.call(
                name, "replica", "Status", query, timeout_s
            )
            return state
        except CallFailed:
            return None

    def _dispatch(self) -> None:
        """Release pulled requests to their callers; carry out evict/resume off the request path."""
        for request, rep in self.core.take_dispatched():
            fut = self._waiters.pop(request.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(rep)
        for rid, reason in self.core.take_shed():  # answered at once: 429 + drop reason
            fut = self._waiters.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result((reason, "shed-for-critical"))
        self._report_policy_stats()
        for action in self.core.take_actions():
            task = asyncio.get_running_loop().create_task(self._execute(action))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _execute(self, action: ReplicaAction) -> None:
        method = {"evict": "Evict", "resume": "Resume", "swap": "SwapModel"}[action.kind]
        message: Any = replica_pb2.RequestIds(request_ids=list(action.request_ids))
        if action.kind == "swap":
            message = replica_pb2.ModelSwapOrder(model=action.model)
        with self._tracer.start_as_current_span(f"lso.{action.kind}") as span:
            span.set_attribute("slomesh.replica", action.application)
            span.set_attribute("slomesh.request_ids", list(action.request_ids))
            if action.kind == "swap":  # what the scheduler saw of the replica when it sent it
                view = self.core.replicas[action.application]
                placed = [r.model for r in view.in_flight.values()]
                swap_event(span, action.application, action.model, view.status(), placed)
            # a replica that is gone fails its requests at the ingress, which reports them
            with contextlib.suppress(CallFailed):
                await self.client.call(action.application, "replica", method, message)

    def _report_policy_stats(self) -> None:
        """Admission state and queueing-policy events as metrics (services/scheduler/metrics.py)."""
        self._metrics.report(self.core)

    async def Health(
        self,
        request: scheduler_pb2.HealthQuery,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.HealthReply:
        require_mesh_credential(grpc_context, "scheduler.Health")
        self._start_reconciler()
        ok, reason = self.core.health()
        return scheduler_pb2.HealthReply(
            can_admit=ok,
            reason=reason,
            queued=self.core.queued,
            in_flight=sum(len(r.in_flight) for r in self.core.replicas.values()),
            ready_models=self.ready_models(),
            **self.shard_health(),
        )

    async def AutoscaleSignal(
        self, model: str, pool: str = "", replica_id: str = ""
    ) -> dict[str, float]:
        """The model's load as flat metrics (core/autoscale/wire.py), for the Serve autoscaling
        policy of its replica pool (autoscale_hook.py). Called over Serve handles only (no gRPC
        servicer method): the pool replicas relay it as their custom autoscaling metrics. The
        callers of pool `pool` are its running replicas: the pool's engine count (admission
        limit and engine size) follows them."""
        now = time.time()
        rep = self.core.replicas.get(pool)
        if rep is not None and pool in self._pooled and replica_id:
            rep.engines = self.scaling.seen(pool, replica_id, now)
            rep.max_num_seqs = self.args.max_num_seqs_per_replica * rep.engines
        serving = [r for r in self.core.replicas.values() if r.serves(model)]
        load = self.scaling.load(
            model,
            now,
            queued=self.core.queued_requests(model),
            ongoing=sum(len(r.in_flight) for r in serving),
            profile=serving[0].profile_ if serving else None,
        )
        return encode(load)

    def UpdateReplica(
        self, request: common_pb2.ReplicaState, grpc_context: Any = None
    ) -> scheduler_pb2.ReportReply:
        require_mesh_credential(grpc_context, "scheduler.UpdateReplica")
        self.states[request.replica.application] = request
        if (replica := self.core.replicas.get(request.replica.application)) is not None:
            replica.pushed_s = time.time()  # a probe answer asked before is older now
        self._queue_report(request.replica.application, request)
        return scheduler_pb2.ReportReply()


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.scheduler.deployment:build_app`)."""
    parsed = SchedulerArgs.model_validate(args).model_dump(mode="json")
    app: Application = SchedulerDeployment.bind(parsed)  # type: ignore[attr-defined]
    return app
