"""The predictor deployment: Predict / Observe over a pure LengthPredictor (named in config).

Both run the steps of services/predictor/online.py, the same ones `slomesh predictor replay` runs;
Batch runs many of them in one call, in order (the ingress's background work). The "learned"
predictor's weights learn completions in batches of `live_batch_size`, or whatever is buffered
every `learn_interval_s`: a pass costs about the same for a few completions as for hundreds.
"""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry import context as otel_context
from pydantic import BaseModel, ConfigDict, Field, model_validator
from ray import serve
from ray.serve import Application

from services.predictor import online
from services.predictor.core.registry import create_predictor
from shared.domain import Request
from shared.rpc.convert import request_from_meta
from shared.rpc.internal_http import internal_not_found
from shared.rpc.invalid_argument import request_or_refuse
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2
from shared.telemetry import (
    TracingConfig,
    context_from,
    incoming_context,
    setup_tracing,
    tracer,
)


class PredictorArgs(BaseModel):
    """Arguments of the predictor application."""

    model_config = ConfigDict(extra="forbid")

    predictor: str = "learned"
    """Implementation, a name from services.predictor.core.registry.PREDICTORS: "learned" (the
    shipped prompt-aware model, learning online) or "online-histogram" (prompt-less)."""
    config: dict[str, Any] = Field(default_factory=dict)
    """That implementation's settings."""
    model_path: str | None = None
    """Persisted model file of the "learned" predictor (None: the shipped default model)."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""
    live_batch_size: int = Field(default=2048, ge=1)
    """Completions the service buffers for one `partial_fit` pass of the "learned" predictor
    (its `online_batch_size`, unless `config` names one). A pass touches every threshold
    classifier's whole weight vector, so it costs about as much for 32 completions as for a
    thousand: larger batches cut the CPU per completion; `learn_interval_s` bounds the wait
    (below about 200 requests a second the timer, not a full batch, starts the passes)."""
    learn_interval_s: float | None = Field(default=10.0, gt=0)
    """Seconds between passes over whatever completions are buffered, however few, so a
    completion reaches the weights within about this long (the tenant history and the online
    layer learn each completion at once); None: passes only when a batch is full."""

    @model_validator(mode="after")
    def _model_path_needs_learned(self) -> PredictorArgs:
        if self.model_path is not None and self.predictor != "learned":
            raise ValueError("model_path is only for predictor 'learned'")
        return self

    def core_config(self) -> dict[str, Any] | None:
        """The implementation's config, with model_path folded in (None: all defaults)."""
        config = dict(self.config)
        if self.model_path is not None:
            config["model_path"] = self.model_path
        if self.predictor == "learned":
            config.setdefault("online_batch_size", self.live_batch_size)
        return config or None


@serve.deployment(max_ongoing_requests=4096, ray_actor_options={"num_cpus": 0.1})
class PredictorDeployment:
    """Predict, Observe and Batch (many of both, in order) over one core.

    The methods are coroutines that never await while they use the core: they run on the
    replica's event loop one at a time, so the core (not thread-safe) needs no lock, and a
    call costs no hand-off to Serve's thread pool (sync methods run there: measured, the
    hand-off cost more CPU than the prediction on a busy host)."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = PredictorArgs.model_validate(args)
        setup_tracing("predictor", self.args.tracing)
        self.core = create_predictor(self.args.predictor, self.args.core_config())
        self._tracer = tracer("predictor")
        self._learner: asyncio.Task[None] | None = None

    def learn_buffered(self) -> int:
        """One pass of the core's online learning over its buffered completions (a core that
        buffers none: no-op); the completions learned."""
        learn = getattr(self.core, "learn_pending", None)
        return int(learn()) if learn is not None else 0

    def _start_learner(self) -> None:
        """The timer of `learn_interval_s`, from the first completion on (on the replica's
        event loop: a pass runs between calls, never during one)."""
        if self.args.learn_interval_s is None or self._learner is not None:
            return
        self._learner = asyncio.get_running_loop().create_task(self._learn_loop())

    async def _learn_loop(self) -> None:
        assert self.args.learn_interval_s is not None
        while True:
            await asyncio.sleep(self.args.learn_interval_s)
            self.learn_buffered()

    async def __call__(self, request: Any) -> Any:
        """HTTP on this internal application's route prefix: 404 (shared/rpc/internal_http.py)."""
        return internal_not_found("predictor")

    async def Predict(
        self,
        request: predictor_pb2.PredictRequest,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> common_pb2.LengthPrediction:
        require_mesh_credential(grpc_context, "predictor.Predict")
        req = request_or_refuse(request.meta, grpc_context, "predictor.Predict")
        return self._predict(req, request.prompt, incoming_context(grpc_context, trace_headers))

    async def Observe(
        self,
        request: predictor_pb2.Observation,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> predictor_pb2.ObserveReply:
        require_mesh_credential(grpc_context, "predictor.Observe")
        req = request_or_refuse(request.meta, grpc_context, "predictor.Observe")
        n = online.observe(self.core, req, request.output_tokens)
        self._start_learner()
        return predictor_pb2.ObserveReply(observations=n)

    async def Batch(
        self,
        request: predictor_pb2.PredictorBatch,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> predictor_pb2.PredictorBatchReply:
        """Every item in order, each the step its single call runs (online.py); a run of
        predictions between observations is one `predict_many` (what predicting them in turn
        gives, in one matrix product). An item whose metadata breaks a domain rule is skipped,
        not the batch."""
        require_mesh_credential(grpc_context, "predictor.Batch")
        done = 0
        run: list[tuple[Request, str, otel_context.Context | None]] = []
        for item in request.items:
            kind = item.WhichOneof("work")
            if kind is None:
                continue
            meta = item.predict.meta if kind == "predict" else item.observe.meta
            try:
                req = request_from_meta(meta)
            except ValueError:
                continue
            done += 1
            if kind == "predict":
                parent = context_from(dict(item.trace_headers)) if item.trace_headers else None
                run.append((req, item.predict.prompt, parent))
                continue
            self._predict_many(run)
            run = []
            online.observe(self.core, req, item.observe.output_tokens)
            self._start_learner()
        self._predict_many(run)
        return predictor_pb2.PredictorBatchReply(observations=self.core.observations, done=done)

    def _predict_many(self, run: list[tuple[Request, str, otel_context.Context | None]]) -> None:
        """Predictions nobody waits for, in one pass; each gets its `predict` span."""
        if not run:
            return
        spans = [self._tracer.start_span("predict", context=parent) for _, _, parent in run]
        dists = online.predict_many(self.core, [r for r, _, _ in run], [p for _, p, _ in run])
        for span, dist in zip(spans, dists, strict=True):
            span.set_attribute("slomesh.predicted_mean_tokens", dist.mean_tokens)
            span.set_attribute("slomesh.batched", len(run))
            span.end()

    def _predict(
        self, req: Request, prompt: str, parent: otel_context.Context | None
    ) -> common_pb2.LengthPrediction:
        with self._tracer.start_as_current_span("predict", context=parent) as span:
            dist = online.predict(self.core, req, prompt)
            span.set_attribute("slomesh.predicted_mean_tokens", dist.mean_tokens)
            return common_pb2.LengthPrediction(
                mean_tokens=dist.mean_tokens,
                p50_tokens=dist.p50_tokens,
                p90_tokens=dist.p90_tokens,
                bucket_upper_tokens=list(dist.bucket_upper_tokens),
                bucket_probs=list(dist.bucket_probs),
                predictor_version=dist.version,
            )


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.predictor.deployment:build_app`)."""
    parsed = PredictorArgs.model_validate(args).model_dump(mode="json")
    app: Application = PredictorDeployment.bind(parsed)  # type: ignore[attr-defined]
    return app
