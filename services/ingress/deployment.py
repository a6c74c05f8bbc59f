"""The ingress deployment: OpenAI-compatible HTTP (Serve + FastAPI) and the gRPC Ingress service.

Thin shell over `pipeline.Pipeline` and the pure core in `core/`: parse, admit, stream. Every
error is OpenAI's error JSON with the right status (and Retry-After on overload), unexpected
exceptions included (a 500 in the same shape, `http_api`); a client that disconnects
mid-stream cancels the replica call, which aborts the request in the engine. The OpenAPI
document (`/openapi.json`) describes the request bodies and error responses although the
handlers parse the raw bodies themselves.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Path
from fastapi import Request as HTTPRequest
from fastapi.responses import JSONResponse, Response
from opentelemetry import context as otel_context
from ray import serve
from ray.serve import Application
from ray.serve.config import BackpressureConfig

from services.ingress.args import IngressArgs
from services.ingress.batch_api import BatchAPI
from services.ingress.core.errors import (
    APIError,
    ErrorResponse,
    internal_error,
    invalid_unicode,
    overloaded,
)
from services.ingress.core.json_body import decode_json
from services.ingress.core.request_view import read_view
from services.ingress.doors import open_doors
from services.ingress.front_door import FrontDoor, door_lifespan, in_serve_replica
from services.ingress.grpc_door import GrpcDoor
from services.ingress.http_api import (
    IngressAPI,
    completion_route_docs,
    error_docs,
    error_response,
    install_error_handling,
    log,
    read_body,
)
from services.ingress.observer import ServeMetricsObserver
from services.ingress.openai_relay import grpc_chunks, http_response, model_card
from services.ingress.pipeline import Pipeline
from services.ingress.predictor_feed import serve_drop_counter
from shared.rpc.slomesh.v1 import ingress_pb2
from shared.telemetry import context_from, setup_tracing

app = IngressAPI(title="slomesh", version="0.1.0", lifespan=door_lifespan)
install_error_handling(app)  # before @serve.ingress, which freezes a copy of the app


# Serve serializes the deployment class when the decorator runs: helpers it calls must be
# defined above it.
def _error(err: APIError) -> JSONResponse:
    return error_response(err)


def _decode(raw: bytes, limits: Any) -> Any:
    """The body's JSON under the ingress's hostile-input rules (size, depth, Unicode); a body
    that is text but not JSON goes to vLLM as it came, which answers its own 400."""
    try:
        return decode_json(
            raw, max_body_bytes=limits.max_body_bytes, max_json_depth=limits.max_json_depth
        )
    except APIError as err:
        if err.code != "invalid_json":
            raise
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:  # the ingress's own rule: not even text
            raise invalid_unicode(None, "the body is not valid UTF-8") from None
        return None


def _grpc_body(req: ingress_pb2.GenerateRequest) -> tuple[str, dict[str, Any]]:
    """The OpenAI body of a gRPC GenerateRequest: chat when it has messages, else a completion;
    streamed, with its SLO as slomesh's `slo` extension."""
    data: dict[str, Any] = {"model": req.model, "stream": True, "temperature": req.temperature}
    if req.priority:
        data["priority"] = req.priority
    if req.max_tokens:
        data["max_tokens"] = req.max_tokens
    slo = {
        k: v
        for k, v in (
            ("ttft_ms", req.slo.ttft_slo_ms),
            ("tpot_ms", req.slo.tpot_slo_ms),
            ("deadline_ms", req.slo.deadline_ms),
        )
        if v
    }
    if slo:
        data["slo"] = slo
    elif req.slo_class:
        data["slo"] = req.slo_class
    if req.messages:
        data["messages"] = [{"role": m.role, "content": m.content} for m in req.messages]
        return "/v1/chat/completions", data
    data["prompt"] = req.prompt
    return "/v1/completions", data


def _grpc_status(http_status: int) -> Any:
    from services.ingress.grpc_door import grpc_status

    return grpc_status(http_status)


FileId = Annotated[str, Path(pattern=r"^file-[A-Za-z0-9]{1,64}$")]
BatchId = Annotated[str, Path(pattern=r"^batch_[A-Za-z0-9]{1,64}$")]
_BATCH_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": what}
    for status, what in (
        (400, "Invalid request: the message names the field (or the file's line) and the rule"),
        (401, "Missing or invalid API key (only when keys are configured)"),
        (404, "No file or batch with that id for this key's tenant"),
        (408, "The body stalled (upload_idle_timeout_s) or was too slow (upload_deadline_s)"),
        (409, "The batch is final (cancel), or the file is an open batch's input (delete)"),
        (413, "Body over batch.max_file_bytes or batch.max_create_body_bytes (reading stopped)"),
        (429, "A per-tenant cap (files, stored bytes, open batches), or too many uploads at once"),
        (500, "Unexpected server fault"),
    )
}


@serve.deployment(max_ongoing_requests=4096, ray_actor_options={"num_cpus": 0.1})
@serve.ingress(app)
class IngressDeployment:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = IngressArgs.model_validate(args)
        setup_tracing("ingress", self.args.tracing)
        self.args.api_keys.check_classes(self.args.slo)
        self.args.tenancy.check_classes(self.args.slo.classes)
        self.pipeline = Pipeline(self.args, ServeMetricsObserver())
        self.batches = BatchAPI(self.args, self.pipeline)
        self._batch_runner: asyncio.Task[None] | None = None
        self._start_batch_runner()
        self._door: FrontDoor | None = None
        self._grpc_door: GrpcDoor | None = None
        if in_serve_replica():  # never in tests that build the class
            self._door, self._grpc_door = open_doors(self)
            self.pipeline.feed.on_drop = serve_drop_counter()

    def _start_batch_runner(self) -> None:
        """Run this replica's batch runner (from the constructor, which Serve runs on the
        replica's event loop; `check_health` retries if there was no loop yet)."""
        if self._batch_runner is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._batch_runner = loop.create_task(self.batches.runner.run_forever())

    async def check_health(self) -> None:
        """Serve's periodic replica health check: also (re)starts the batch runner."""
        if self._batch_runner is not None and self._batch_runner.done():
            self._batch_runner = None
        self._start_batch_runner()

    async def _batch_call(self, handler: Any, *args: Any) -> Response:
        """A Batch API handler's answer, or its error in OpenAI's shape."""
        try:
            result = handler(*args)
            if asyncio.iscoroutine(result):
                result = await result
        except APIError as err:
            return _error(err)
        return result if isinstance(result, Response) else JSONResponse(result)

    @app.post("/v1/files", responses=_BATCH_ERRORS)
    async def create_file(self, request: HTTPRequest) -> Response:
        """Upload a batch input file (multipart: `file`, `purpose` "batch"); every line is
        validated (custom_id unique, method POST, url, body)."""
        return await self._batch_call(self.batches.upload, request)

    @app.get("/v1/files/{file_id}", responses=_BATCH_ERRORS)
    async def retrieve_file(self, request: HTTPRequest, file_id: FileId) -> Response:
        return await self._batch_call(self.batches.get_file, request, file_id)

    @app.delete("/v1/files/{file_id}", responses=_BATCH_ERRORS)
    async def delete_file(self, request: HTTPRequest, file_id: FileId) -> Response:
        """Delete a file (refused with 409 while a batch that is not final reads it)."""
        return await self._batch_call(self.batches.delete_file, request, file_id)

    @app.get("/v1/files/{file_id}/content", responses=_BATCH_ERRORS)
    async def file_content(self, request: HTTPRequest, file_id: FileId) -> Response:
        return await self._batch_call(self.batches.file_content, request, file_id)

    @app.post("/v1/batches", responses=_BATCH_ERRORS)
    async def create_batch(self, request: HTTPRequest) -> Response:
        """Create a batch from an uploaded file: {input_file_id, endpoint, completion_window}."""
        return await self._batch_call(self.batches.create_batch, request)

    @app.get("/v1/batches", responses=_BATCH_ERRORS)
    async def list_batches(self, request: HTTPRequest) -> Response:
        return await self._batch_call(self.batches.list_batches, request)

    @app.get("/v1/batches/{batch_id}", responses=_BATCH_ERRORS)
    async def retrieve_batch(self, request: HTTPRequest, batch_id: BatchId) -> Response:
        return await self._batch_call(self.batches.get_batch, request, batch_id)

    @app.post("/v1/batches/{batch_id}/cancel", responses=_BATCH_ERRORS)
    async def cancel_batch(self, request: HTTPRequest, batch_id: BatchId) -> Response:
        return await self._batch_call(self.batches.cancel, request, batch_id)

    @app.get(
        "/health",
        responses={
            503: {
                "model": ErrorResponse,
                "description": "The mesh cannot admit now (starting: a configured model has no "
                "ready replica yet; scheduler unreachable, every replica full, or this ingress "
                "at capacity); Retry-After says when to retry",
            }
        },
    )
    async def health(self) -> JSONResponse:
        """200 while the mesh can admit; 503 (OpenAI's error shape, the reason as message)
        when it cannot, so load balancers stop sending traffic here."""
        ok, reason = await self.pipeline.health()
        if ok:
            return JSONResponse({"status": "ok"})
        return error_response(overloaded(f"unhealthy: {reason}", 1.0, status=503))

    @app.get(
        "/v1/models",
        responses={
            503: {
                "model": ErrorResponse,
                "description": "Starting: a configured model has no ready replica yet (or the "
                "scheduler is unreachable); Retry-After says when to retry",
            }
        },
    )
    async def list_models(self) -> JSONResponse:
        """The served models, in vLLM's shape (`root`: the model's tokenizer directory), once
        every one of them has a ready replica (503 until then)."""
        ok, reason = await self.pipeline.health(need_room=False)
        if not ok:
            return error_response(overloaded(f"not ready: {reason}", 1.0, status=503))
        data = [
            model_card(
                m.name,
                os.path.expanduser(m.tokenizer) if m.tokenizer else m.name,
                m.max_model_len,
            )
            for m in self.args.models
        ]
        data += [  # vLLM's LoRA cards: root the adapter's path, parent its base model
            model_card(a.name, a.local_path, None, parent=m.name)
            for m in self.args.models
            for a in m.adapters
        ]
        return JSONResponse({"object": "list", "data": data})

    @app.post("/v1/completions", **completion_route_docs("CompletionRequest"))
    async def completions(self, request: HTTPRequest) -> Response:
        return await self._serve_http(request)

    @app.post("/v1/chat/completions", **completion_route_docs("ChatCompletionRequest"))
    async def chat_completions(self, request: HTTPRequest) -> Response:
        return await self._serve_http(request)

    @app.post("/v1/responses", responses=error_docs())
    async def responses(self, request: HTTPRequest) -> Response:
        """vLLM's Responses API (without `store`: every request stands alone)."""
        return await self._serve_http(request)

    @app.post("/tokenize", responses=error_docs())
    async def tokenize(self, request: HTTPRequest) -> Response:
        return await self._serve_http(request)

    @app.post("/detokenize", responses=error_docs())
    async def detokenize(self, request: HTTPRequest) -> Response:
        return await self._serve_http(request)

    async def _serve_http(self, request: HTTPRequest) -> Response:
        """One OpenAI call, answered by vLLM on a replica; whatever fails on the way, the
        answer is an error JSON in OpenAI's shape."""
        try:
            return await self._answer_http(request)
        except APIError as err:
            return _error(err)
        except Exception as exc:
            log.exception("unexpected error serving %s", request.url.path)
            return _error(internal_error(exc))

    async def _answer_http(self, request: HTTPRequest) -> Response:
        limits = self.args.admission
        token = otel_context.attach(context_from(dict(request.headers)))
        try:
            raw = await read_body(request, limits.max_body_bytes)
            view = read_view(request.url.path, _decode(raw, limits), self.args.models[0].name)
            admitted = await self.pipeline.admit(
                view, raw, dict(request.headers), request.headers.get("authorization")
            )
        finally:
            otel_context.detach(token)
        return await http_response(admitted)

    async def Generate(
        self, request: ingress_pb2.GenerateRequest, grpc_context: Any = None
    ) -> AsyncIterator[ingress_pb2.GenerateChunk]:
        """The gRPC twin of the completions and chat routes: the request goes to vLLM as an
        OpenAI body (stream: true) and its events come back as text chunks."""
        metadata = dict(grpc_context.invocation_metadata()) if grpc_context else {}
        token = otel_context.attach(context_from(metadata))
        try:
            route, body = _grpc_body(request)
            raw = json.dumps(body).encode()
            view = read_view(route, body, self.args.models[0].name)
            admitted = await self.pipeline.admit(view, raw, metadata, metadata.get("authorization"))
        except APIError as err:
            if grpc_context is not None:  # Serve keeps a status set before the raise
                grpc_context.set_code(_grpc_status(err.status))
                grpc_context.set_details(err.message)
            raise RuntimeError(err.message) from None  # plain: it must pickle to the proxy
        finally:
            otel_context.detach(token)
        try:
            async for chunk in grpc_chunks(admitted):
                yield chunk
        except APIError as err:
            if grpc_context is not None:
                grpc_context.set_code(_grpc_status(err.status))
                grpc_context.set_details(err.message)
            raise RuntimeError(err.message) from None


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.ingress.deployment:build_app`)."""
    validated = IngressArgs.model_validate(args)
    parsed = validated.model_dump(mode="json")
    deployment = IngressDeployment.options(  # type: ignore[attr-defined]
        num_replicas=validated.num_replicas,
        max_ongoing_requests=validated.max_ongoing_requests,
        max_queued_requests=validated.max_queued_at_proxy,
        backpressure_config=BackpressureConfig(status_code=429, retry_after_s=1),
    )
    app: Application = deployment.bind(parsed)
    return app
