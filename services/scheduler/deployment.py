"""The scheduler deployment: Admit / Report / UpdateReplica over the pure admission core."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from services.scheduler.core.admission import AdmissionCore, AdmitDecision
from services.scheduler.core.live_view import LiveReplica, ReplicaAction
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.qlm.length_estimates import hint_from_prediction
from services.scheduler.metrics import SchedulerMetrics
from shared.domain import HardwareProfile, Request
from shared.profiles.defaults import default_profile
from shared.profiles.io import load_profiles
from shared.rpc.client import CallFailed, MeshClient, Transport
from shared.rpc.convert import request_from_meta
from shared.rpc.internal_http import internal_not_found
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, scheduler_pb2
from shared.telemetry import TracingConfig, incoming_context, setup_tracing, tracer


class ReplicaEntry(BaseModel):
    """One replica the scheduler may place requests on."""

    model_config = ConfigDict(extra="forbid")

    application: str
    """Serve application name of the replica."""
    gpu: str
    """GPU type ("cpu" for CPU replicas)."""
    model: str
    """Served model name."""
    node: str = ""
    """Node the replica runs on (informational)."""
    tensor_parallel: int = Field(1, ge=1)
    """GPUs of the replica."""


class SchedulerArgs(BaseModel):
    """Arguments of the scheduler application."""

    model_config = ConfigDict(extra="forbid")

    policy: str = "qlm"
    """Global policy, a name from services/scheduler/core/policies.py (qlm, round-robin,
    least-loaded, oracle-ttft, batching)."""
    policy_options: dict[str, Any] = Field(default_factory=dict)
    """That policy's config (QLMConfig or BatchingConfig fields; none for routers)."""
    policy_label: str | None = None
    """Name reported with each decision (the serving stack `slomesh up --policy` resolved);
    None: the policy name."""
    replicas: list[ReplicaEntry] = Field(min_length=1)
    """The replicas to place on."""
    transport: Transport = "handle"
    """How the scheduler calls replicas (Evict / Resume): Serve handles or the gRPC proxy."""
    max_in_flight_per_replica: int = Field(256, ge=1)
    """Admission limit per replica; beyond it requests are rejected with Retry-After."""
    max_num_seqs_per_replica: int = Field(8, ge=1)
    """Requests a replica's engine runs at once (queueing policies pull beyond it only into a
    short engine-side window)."""
    max_queued_requests: int = Field(10_000, ge=0)
    """Queueing policies (`qlm`): requests held in the global queue at most; beyond it arrivals
    are rejected with Retry-After."""
    max_queue_wait_ms: float = Field(8000.0, gt=0)
    """Queueing policies: longest a request waits in the global queue (its TTFT deadline bounds
    it further); then it is answered 429 with Retry-After instead of being left to time out."""
    queue_reject_margin_ms: float = Field(100.0, ge=0)
    """A queued request is answered 429 once its TTFT deadline is closer than this: it could
    not get its first token in time anyway."""
    admit_lease_ms: float = Field(5000.0, gt=0)
    """An admission the replica does not hold this long after placement is released (its
    caller never started the stream or died mid-stream, so no report will come)."""
    reconcile_interval_ms: float = Field(1000.0, gt=0)
    """How often admissions are reconciled with the replicas' Status (while any are open)."""
    tick_interval_ms: float = Field(100.0, gt=0)
    """How often queueing policies are given the chance to pull and re-plan without a report."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""
    profile_files: list[str] = Field(default_factory=list)
    """Profile files (`slomesh profile` output, shared/profiles/io.py format) whose profiles
    replace the roofline defaults for matching (gpu, model, tensor_parallel) replicas."""


ProfileKey = tuple[str, str, int]


def load_profile_files(paths: list[str]) -> dict[ProfileKey, HardwareProfile]:
    """The profiles of `paths` by (gpu, model, tensor_parallel); a later file wins a key."""
    out: dict[ProfileKey, HardwareProfile] = {}
    for path in paths:
        for p in load_profiles(Path(path).expanduser()):
            out[(p.gpu, p.model, p.tensor_parallel)] = p
    return out


def _profile(
    gpu: str,
    model: str,
    tensor_parallel: int = 1,
    loaded: Mapping[ProfileKey, HardwareProfile] | None = None,
) -> HardwareProfile | None:
    """A loaded (measured) profile of the replica first, else the roofline default."""
    hit = (loaded or {}).get((gpu, model, tensor_parallel))
    if hit is not None:
        return hit
    try:
        return default_profile(gpu, model)
    except ValueError:
        return None  # not in the catalogue (e.g. the local CPU model): routers that need one say so


def with_length_hint(req: Request, prediction: common_pb2.LengthPrediction) -> Request:
    """`req` carrying the ingress's length prediction (made with the prompt), when it has one."""
    hint = hint_from_prediction(
        prediction.mean_tokens,
        list(prediction.bucket_upper_tokens),
        list(prediction.bucket_probs),
        req.max_tokens,
        prediction.predictor_version,
    )
    return req if hint is None else dataclasses.replace(req, length_hint=hint)


def live_replicas(args: SchedulerArgs) -> list[LiveReplica]:
    """The scheduler's view of its replicas, each with its profile (loaded files first)."""
    loaded = load_profile_files(args.profile_files)
    return [
        LiveReplica(
            r.application,
            r.gpu,
            r.model,
            _profile(r.gpu, r.model, r.tensor_parallel, loaded),
            max_num_seqs=args.max_num_seqs_per_replica,
        )
        for r in args.replicas
    ]


@serve.deployment(max_ongoing_requests=4096, ray_actor_options={"num_cpus": 0.1})
class SchedulerDeployment:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = SchedulerArgs.model_validate(args)
        setup_tracing("scheduler", self.args.tracing)
        replicas = live_replicas(self.args)
        self.core = AdmissionCore(
            replicas,
            create_global_policy(self.args.policy, self.args.policy_options),
            self.args.policy_label or self.args.policy,
            self.args.max_in_flight_per_replica,
            self.args.max_queued_requests,
            self.args.max_queue_wait_ms / 1e3,
        )
        self._waiters: dict[str, asyncio.Future[LiveReplica | str]] = {}
        self._ticker: asyncio.Task[None] | None = None
        self._reconciler: asyncio.Task[None] | None = None
        self._tracer = tracer("scheduler")
        self.states: dict[str, common_pb2.ReplicaState] = {}
        self.client = MeshClient(transport=self.args.transport)
        self._tasks: set[asyncio.Task[None]] = set()
        self._metrics = SchedulerMetrics()  # names as scraped: deploy/grafana/README.md
        self._in_flight = self._metrics.in_flight

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
        parent = incoming_context(grpc_context, trace_headers)
        with self._tracer.start_as_current_span("grouping", context=parent) as span:
            req = with_length_hint(request_from_meta(request.meta), request.prediction)
            decision = self.core.admit(req, time.time())
            self._dispatch()
            span.set_attribute("slomesh.policy", decision.policy)
            span.set_attribute("slomesh.admitted", decision.admitted)
            if decision.admitted and decision.queued:
                self._start_ticker()
                span.set_attribute("slomesh.queued", True)
                for key, value in self.core.policy.describe(req.request_id).items():
                    span.set_attribute(key, value)
                replans = getattr(getattr(self.core.policy, "stats", None), "replans", 0)
                decision = await self._wait_for_pull(req.request_id, span)
                after = getattr(getattr(self.core.policy, "stats", None), "replans", 0)
                span.set_attribute("slomesh.replans_while_queued", after - replans)
            if not decision.admitted or decision.replica is None:
                span.set_attribute("slomesh.reject_reason", decision.reason)
                return scheduler_pb2.AdmitReply(
                    admitted=False,
                    reason=decision.reason,
                    retry_after_s=decision.retry_after_s,
                    policy=decision.policy,
                )
            rep = decision.replica
            self._start_reconciler()
            self._in_flight.set(len(rep.in_flight), tags={"serving_replica": rep.application})
            span.set_attribute("slomesh.replica", rep.application)
            span.set_attribute("slomesh.queue_position", len(rep.in_flight) - 1)
            return scheduler_pb2.AdmitReply(
                admitted=True,
                replica=common_pb2.ReplicaRef(
                    application=rep.application, gpu=rep.gpu, model=rep.model
                ),
                policy=decision.policy,
            )

    async def Report(
        self,
        request: scheduler_pb2.CompletionReport,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.ReportReply:
        require_mesh_credential(grpc_context, "scheduler.Report")
        owner = self.core.report(request.meta.request_id, request.output_tokens, time.time())
        self._dispatch()
        if owner is not None:
            self._in_flight.set(len(owner.in_flight), tags={"serving_replica": owner.application})
        return scheduler_pb2.ReportReply()

    async def _wait_for_pull(self, request_id: str, span: Any) -> AdmitDecision:
        """A queued request waits here until a replica pulls it, its deadline expires (answered
        at once with a rejection) or the caller goes away."""
        fut: asyncio.Future[LiveReplica | str] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = fut
        t0 = time.time()
        try:
            got = await fut
        except asyncio.CancelledError:
            self._waiters.pop(request_id, None)
            self.core.report(request_id, 0, time.time())  # leaves the queue; nothing is lost
            raise
        span.set_attribute("slomesh.queue_wait_ms", (time.time() - t0) * 1e3)
        if isinstance(got, str):
            return AdmitDecision(False, None, got, 1.0, self.core.policy_label)
        return AdmitDecision(True, got, policy=self.core.policy_label)

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
                    fut.set_result("overloaded: TTFT deadline cannot be met from the queue")

    def _start_reconciler(self) -> None:
        if self._reconciler is None or self._reconciler.done():
            self._reconciler = asyncio.get_running_loop().create_task(self._reconcile_loop())

    def _open_admissions(self) -> int:
        return sum(len(r.in_flight) + len(r.evicted) for r in self.core.replicas.values())

    async def _reconcile_loop(self) -> None:
        """Release admissions no replica holds (module docstring of core/admission.py)."""
        while self._open_admissions():
            await asyncio.sleep(self.args.reconcile_interval_ms / 1e3)
            for name, rep in list(self.core.replicas.items()):
                if not (rep.in_flight or rep.evicted):
                    continue
                try:
                    state = await self.client.call(
                        name, "replica", "Status", replica_pb2.StatusQuery()
                    )
                except CallFailed:
                    continue  # its streams fail at the ingress, which reports them
                lost = self.core.release_unheld(
                    name, set(state.request_ids), time.time(), self.args.admit_lease_ms / 1e3
                )
                if lost:
                    self._dispatch()
                    self._in_flight.set(len(rep.in_flight), tags={"serving_replica": name})

    def _dispatch(self) -> None:
        """Release pulled requests to their callers; carry out evict/resume off the request path."""
        for request, rep in self.core.take_dispatched():
            fut = self._waiters.pop(request.request_id, None)
            if fut is not None and not fut.done():
                fut.set_result(rep)
        self._report_policy_stats()
        for action in self.core.take_actions():
            task = asyncio.get_running_loop().create_task(self._execute(action))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _execute(self, action: ReplicaAction) -> None:
        method = "Evict" if action.kind == "evict" else "Resume"
        message = replica_pb2.RequestIds(request_ids=list(action.request_ids))
        with self._tracer.start_as_current_span(f"lso.{action.kind}") as span:
            span.set_attribute("slomesh.replica", action.application)
            span.set_attribute("slomesh.request_ids", list(action.request_ids))
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
        ok, reason = self.core.health()
        return scheduler_pb2.HealthReply(
            can_admit=ok,
            reason=reason,
            queued=self.core.queued,
            in_flight=sum(len(r.in_flight) for r in self.core.replicas.values()),
        )

    def snapshot(self) -> dict[str, Any]:
        """Admission state for health checks and operators: queued, waiting callers, and per
        replica the requests in flight / evicted and the age of the oldest (s)."""
        now = time.time()
        return {
            "queued": self.core.queued,
            "waiters": len(self._waiters),
            "replicas": {
                name: {
                    "in_flight": len(rep.in_flight),
                    "evicted": len(rep.evicted),
                    "oldest_s": max(
                        (now - r.arrival_s for r in rep.in_flight.values()), default=0.0
                    ),
                }
                for name, rep in self.core.replicas.items()
            },
        }

    def UpdateReplica(
        self, request: common_pb2.ReplicaState, grpc_context: Any = None
    ) -> scheduler_pb2.ReportReply:
        require_mesh_credential(grpc_context, "scheduler.UpdateReplica")
        self.states[request.replica.application] = request
        return scheduler_pb2.ReportReply()


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.scheduler.deployment:build_app`)."""
    parsed = SchedulerArgs.model_validate(args).model_dump(mode="json")
    app: Application = SchedulerDeployment.bind(parsed)  # type: ignore[attr-defined]
    return app
