"""One request's trip through the mesh, framework-free: the ingress deployment's HTTP routes and
gRPC method both drive it.

Hot path: with a lease credit for a replica of the model (fast_path.py, while the cluster has
headroom) straight to replica.Generate (stream), predictor.Predict and scheduler.Place following
in the background; without one, predictor.Predict -> scheduler.Admit (QLM queueing) ->
replica.Generate. The scheduler only sees metadata; the prompt goes to the replica. Completion
reports (scheduler.Report, predictor.Observe) leave the hot path as background tasks (the
predictor's in batches, with fast-path predictions: predictor_feed.py). The replica stream's
relay is relay.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from services.ingress.admission_gate import AdmissionGate, DeliveredGate
from services.ingress.args import IngressArgs
from services.ingress.core.auth import Principal, authenticate
from services.ingress.core.errors import APIError, overloaded, scheduler_rejection
from services.ingress.core.prompt_prefix import prompt_prefix
from services.ingress.core.rate_limit import TokenRateLimiter
from services.ingress.core.request_meta import ModelInfo, admission_request, estimate_tokens
from services.ingress.core.request_view import (
    RequestView,
    forward_body,
    parse_slo,
    prompt_text,
)
from services.ingress.core.slice_budget import served_slice_tokens
from services.ingress.core.slo import resolve_slo
from services.ingress.core.tenancy import Tenancy, admit_tenancy
from services.ingress.observer import NullObserver, RequestObserver
from services.ingress.predictor_feed import PredictorFeed
from services.ingress.relay import StreamRelay
from services.ingress.shard_admission import ShardedAdmission
from services.ingress.shard_router import ShardedFastPath, ShardRouter
from services.ingress.slicing import slice_streams
from services.ingress.tokenizers import load_tokenizers
from shared.domain import SLO, Request
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.convert import request_to_meta
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2, replica_pb2, scheduler_pb2
from shared.telemetry import trace_headers, tracer


@dataclass(frozen=True)
class BatchAdmission:
    """A batch request's settled admission inputs: its creator, SLO and idempotent id."""

    principal: Principal
    slo: SLO
    request_id: str
    criticality: int = -1  # the band (gateway convention): -1 sheddable, the lowest default one
    engine_priority: int = 1000  # the engine's order (vLLM's, lower first): the last


@dataclass
class Admitted:
    """An admitted request: its metadata, prompt, replica and output stream."""

    request: Request
    prompt: str
    replica: str
    chunks: AsyncIterator[replica_pb2.ReplicaChunk]
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    """Response headers slomesh adds to vLLM's (an entitlement's clamp)."""


class Pipeline(ShardedAdmission, StreamRelay):
    def __init__(self, args: IngressArgs, observer: RequestObserver | None = None) -> None:
        self.args = args
        self.observer: RequestObserver = observer or NullObserver()
        self.models = {m.name: ModelInfo(m.name, m.max_model_len) for m in args.models}
        """The base models."""
        self.named = {
            **self.models,
            **{
                a.name: ModelInfo(a.name, m.max_model_len, m.name)
                for m in args.models
                for a in m.adapters
            },
        }
        """Every name a client may put in `model`: the base models and their adapters."""
        self.client = MeshClient(
            args.grpc_target,
            timeout_s=args.call_timeout_s,
            transport=args.transport,
            stream_idle_timeout_s=args.replica_idle_timeout_s,
        )
        self._tokenizers = load_tokenizers(args.models)
        self._tracer = tracer("ingress")
        self._background: set[asyncio.Task[None]] = set()
        self.admitting = 0
        self._rate_limiter = TokenRateLimiter()
        """Requests in admission right now (bounded by max_admitting_requests)."""
        self.default_model = args.models[0].name if args.models else ""
        """The model of a request that names none (vLLM serves its first)."""
        self._class_ttfts = [c.ttft_ms / 1e3 for c in args.slo.classes.values()]
        self.shards = ShardRouter(args.scheduler, lambda: self.client)
        """The scheduler shards and which one admits a request (shard_router.py)."""
        self.admitted_by: dict[str, str] = {}
        """Request id -> the shard that admitted it (its Report goes there)."""
        self.fast = ShardedFastPath(lambda: self.client, self.shards)
        """Lease credits, if the shards grant them (fast_path.py)."""
        self.gate = AdmissionGate(args.reject_hold_off_s, self.observer)
        self.delivered = DeliveredGate(args.delivered_guard, self.observer)
        """Admission on the latency this ingress's streams measured (core/delivered.py)."""
        self.feed = PredictorFeed(self._send_feed, args.predictor_feed)
        """Fast-path predictions and completions for the predictor, batched (predictor_feed.py)."""

    async def admit(
        self,
        view: RequestView,
        raw: bytes,
        headers: Mapping[str, str],
        authorization: str | None,
        batch: BatchAdmission | None = None,
    ) -> Admitted:
        """Admit, place and open the replica call of `view` (the request's body `raw`); raises
        APIError (4xx/5xx) before anything reaches a replica.

        One trace per request: a root `request` span (ended when the stream ends) holds
        `admission` here, `grouping` in the scheduler and `execution` in the replica. A batch
        request (`batch`) comes with its creator, SLO and idempotent id already settled.
        """
        if self.admitting >= self.args.max_admitting_requests:
            self.observer.rejected("", "ingress at capacity")
            raise overloaded(
                f"ingress at capacity: {self.admitting} requests in admission "
                "(max_admitting_requests)",
                1.0,
                drop_reason="ingress-at-capacity",
            )
        root = self._tracer.start_span("request")
        self.admitting += 1
        try:
            return await self._admit(view, raw, headers, authorization, root, batch)
        except BaseException as err:
            root.set_attribute("slomesh.error", str(err))
            root.end()
            raise
        finally:
            self.admitting -= 1

    async def _admit(
        self,
        view: RequestView,
        raw: bytes,
        headers: Mapping[str, str],
        authorization: str | None,
        root: trace.Span,
        batch: BatchAdmission | None = None,
    ) -> Admitted:
        ctx = trace.set_span_in_context(root)
        with self._tracer.start_as_current_span("admission", context=ctx) as span:
            if batch is None:
                principal, ten = admit_tenancy(
                    authenticate(authorization, self.args.api_keys),
                    headers,
                    view.priority,
                    self.args.tenancy,
                    self.admitting,
                    self.args.max_admitting_requests,
                )
                slo = resolve_slo(
                    parse_slo(view.slo),
                    headers,
                    ten.slo_class or principal.default_class,
                    self.args.slo,
                )
            else:
                principal, slo = batch.principal, batch.slo
                ten = Tenancy(
                    principal.tenant,
                    principal.weight,
                    None,
                    batch.criticality,
                    None,
                    fixed_engine_priority=batch.engine_priority,
                    tie_break=view.priority,
                )
            named = self.named.get(view.model)
            tokenizer = self._tokenizers.get(named.base or named.name if named else view.model)
            prompt, ids = prompt_text(view, tokenizer)
            req = admission_request(
                request_id=batch.request_id if batch else uuid.uuid4().hex[:16],
                view=view,
                principal=principal,
                slo=slo,
                prompt_tokens=len(ids) if ids is not None else estimate_tokens(prompt),
                models=self.named,
                arrival_s=time.time(),
                config=self.args.admission,
            )
            req, answer_headers = ten.entitled(req, self._class_ttfts)
            self.gate.check(req)  # 429 at once while the scheduler's last "no" holds
            self.delivered.check(req)  # 429 at once when predicted to miss its SLO
            if prompt:
                req = dataclasses.replace(req, prefix=prompt_prefix(prompt, ids))
            try:
                self._rate_limiter.admit(principal.tokens_per_minute, req, time.monotonic())
            except APIError:
                self.observer.rejected(slo.class_name, "rate limited")
                raise
            meta = request_to_meta(req)
            span.set_attribute("slomesh.request_id", req.request_id)
            span.set_attribute("slomesh.slo_class", slo.class_name)
            span.set_attribute("slomesh.ttft_slo_ms", slo.ttft_deadline_s * 1e3)
            self.delivered.start(req, view.stream)
            try:
                reply, admit_msg = await self._place(req, meta, prompt, span)
            except BaseException as err:
                self.delivered.end(req.request_id, 0)
                if isinstance(err, APIError) and err.status in (429, 503):
                    # the mesh said no: the quota is not spent
                    self._rate_limiter.refund(principal.tokens_per_minute, req, time.monotonic())
                raise
        token = otel_context.attach(ctx)  # the replica's `execution` span joins this trace
        try:
            headers = trace_headers()
        finally:
            otel_context.detach(token)
        body = forward_body(view, raw)
        generate = replica_pb2.ReplicaGenerateRequest(
            meta=meta,
            http=replica_pb2.HttpCall(
                method="POST",
                path=view.route,
                headers=[replica_pb2.Header(name="content-type", value="application/json")],
                body=body,
            ),
        )
        # an OpenAI call is served whole on one replica (core/slice_budget.py)
        budget = served_slice_tokens(int(reply.slice_tokens))
        open_stream = slice_streams(
            self.client, generate, headers, budget, self._admit_call, admit_msg
        )

        async def readmit() -> Any:
            return await self._admit_call(admit_msg)

        root.set_attribute("slomesh.request_id", req.request_id)
        stream = self._stream(req, reply.replica, open_stream, readmit, root)
        return Admitted(req, prompt, reply.replica.application, stream, answer_headers)

    async def _place(
        self, req: Request, meta: common_pb2.RequestMeta, prompt: str, span: trace.Span
    ) -> tuple[Any, scheduler_pb2.AdmitRequest]:
        """Where the request runs: on a lease credit at once (fast_path.py: the prediction and
        the scheduler's notice follow in the background), else Predict, then Admit (which may
        queue it: QLM). Raises APIError on a rejection."""
        taken = self.fast.take(req.model, req.request_id)
        if taken is not None:
            replica, shard = taken
            self.admitted_by[req.request_id] = shard
            span.set_attribute("slomesh.fast_path", True)
            span.set_attribute("slomesh.replica", replica.application)
            self.fast.notify(meta, self._predict_later(meta, prompt), replica, shard)
            reply = scheduler_pb2.AdmitReply(admitted=True, replica=replica)
            return reply, scheduler_pb2.AdmitRequest(meta=meta)
        prediction = await self._predict(meta, prompt)
        span.set_attribute("slomesh.predicted_mean_tokens", prediction.mean_tokens)
        admit_msg = scheduler_pb2.AdmitRequest(meta=meta, prediction=prediction)
        try:
            reply = await self._admit_call(admit_msg)
        except BaseException:
            # cancelled (client gone) or failed while the scheduler may already have
            # admitted it: release the place; Report of an unknown id is a no-op
            self._report(req, common_pb2.ReplicaRef(), 0.0, time.time(), 0, "abort")
            raise
        self.gate.observe(req, reply)
        span.set_attribute("slomesh.admitted", reply.admitted)
        if not reply.admitted:
            span.set_attribute("slomesh.reject_reason", reply.reason)
            self.observer.rejected(req.slo.class_name, reply.reason)
            raise scheduler_rejection(reply.reason, reply.retry_after_s, reply.drop_reason)
        span.set_attribute("slomesh.replica", reply.replica.application)
        self.fast.admitted(req.model, self.scheduler_of(req.request_id))  # credits may follow
        return reply, admit_msg

    async def health(self, need_room: bool = True) -> tuple[bool, str]:
        """Whether the mesh serves now: every configured model has a replica that has answered
        the scheduler (warming up otherwise: /health and /v1/models answer 503) and, with
        `need_room`, the scheduler answers within the call deadline and reports room (the
        ingress's /health turns 503 otherwise)."""
        if need_room and self.admitting >= self.args.max_admitting_requests:
            return False, "ingress at capacity (max_admitting_requests)"
        try:
            replies = await self._shard_health()
        except CallFailed as err:
            return False, f"scheduler unavailable: {err.code}"
        ready = {m for r in replies for m in r.ready_models}
        waiting = [m for m in self.models if m not in ready]
        if waiting:
            names = ", ".join(f"'{m}'" for m in waiting)
            return False, f"starting: no replica of model {names} is ready yet"
        if not need_room:
            return True, ""
        if any(r.can_admit for r in replies):
            return True, ""
        return False, str(replies[0].reason)

    async def _predict(
        self, meta: common_pb2.RequestMeta, prompt: str
    ) -> common_pb2.LengthPrediction:
        try:
            result: common_pb2.LengthPrediction = await self.client.call(
                "predictor",
                "predictor",
                "Predict",
                predictor_pb2.PredictRequest(meta=meta, prompt=prompt),
            )
            return result
        except CallFailed:
            return common_pb2.LengthPrediction()  # admission goes on without a prediction

    async def _predict_later(self, meta: common_pb2.RequestMeta, prompt: str) -> None:
        """A fast-path request's prediction, queued for the next predictor.Batch (run in the
        trace context of its admission: its `predict` span joins the request's trace)."""
        self.feed.predict(meta, prompt, trace_headers())

    async def _send_feed(self, batch: predictor_pb2.PredictorBatch) -> Any:
        return await self.client.call("predictor", "predictor", "Batch", batch)

    async def _call(
        self, service: str, method: str, message: Any, timeout_s: float | None = None
    ) -> Any:
        try:
            return await self.client.call(service, service, method, message, timeout_s)
        except CallFailed as err:
            raise APIError(
                503,
                f"{service} unavailable: {err.code}",
                "server_overloaded",
                None,
                "service_unavailable",
                1.0,
            ) from None

    def _report(
        self,
        req: Request,
        replica: common_pb2.ReplicaRef,
        first: float,
        finish: float,
        tokens: int,
        reason: str,
    ) -> None:
        meta = request_to_meta(req)
        shard = self.scheduler_of(req.request_id)
        self.admitted_by.pop(req.request_id, None)
        report = scheduler_pb2.CompletionReport(
            meta=meta,
            replica=replica,
            first_token_unix_s=first,
            finish_unix_s=finish,
            output_tokens=tokens,
            finish_reason=reason,
        )

        # batched, after the request's placement (shard_outbox.py); best effort: the
        # scheduler also frees slots of replicas it sees fail
        self.fast.report(shard, report)
        if reason in ("stop", "length"):
            self.feed.observe(meta, tokens)  # batched (predictor_feed.py)
