"""A replica's OpenAI serving: vLLM's own application (vllm/openai_app.py) on the replica's
engine, vLLM's `AsyncLLM` for `engine: vllm` or `SimulatedAsyncLLM` (sim_llm.py) for
`engine: simulated`, both behind `SLOEngineClient` (vllm/engine_client.py).

`OpenAIServing.serve` answers one `HttpCall` (the ingress's forwarded request) as replica
chunks: the response's status and headers, then its body in the pieces response_pieces.py
groups it into, each with the output tokens counted so far, and a last chunk with the end of
the body, the finish reason and prompt tokens for the control plane. Closing the stream early
aborts the request in the engine (asgi_call.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

from services.replica.adapters import AdapterLoadError, AdapterSlots, ReplicaAdapters
from services.replica.asgi_call import Exchange
from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.response_pieces import Piece, pieces
from services.replica.vllm.engine_client import SERVING, SLOEngineClient
from services.replica.vllm.openai_app import ServingOptions, build_openai_app
from shared.domain import Request
from shared.domain.engine import EngineStatus
from shared.domain.engine_metadata import engine_metadata
from shared.rpc.slomesh.v1 import replica_pb2

PASSED_HEADERS = frozenset({"content-type", "traceparent", "tracestate"})
"""Request headers the ingress passes on to vLLM's application (never credentials, never
vLLM's own priority or routing headers)."""


@dataclass
class OpenAIServing:
    """vLLM's OpenAI application over one engine, and what the replica reads of it."""

    app: Any
    client: SLOEngineClient
    model: str
    sim_core: Any = None
    """The simulated engine core (sim_llm.SimulatedEngineCore) when the engine is simulated."""
    heartbeat_s: float = 5.0
    """An empty chunk goes out after this long without one (a queued request, a response
    that is not streamed), so the caller's idle timeout tells a silent replica from a busy
    one."""
    interval_s: float = 0.01
    """After the first token, the response goes out in at most one message per this many
    seconds (the end at once; response_pieces.py); 0: whatever is ready at each wake-up."""
    adapters: AdapterSlots | None = None
    """The LoRA adapters this replica loads on demand (None: the base model only)."""

    def adapter_names(self) -> list[str]:
        """The adapters loaded now, least recently used first."""
        return self.adapters.names() if self.adapters is not None else []

    def loads_adapter(self, request: Request) -> bool:
        """Whether `serve` loads the request's adapter before vLLM's application answers."""
        adapter = request.adapter
        return adapter is not None and self.adapters is not None and self.adapters.serves(adapter)

    async def serve(
        self, request: Request, http: replica_pb2.HttpCall, accept_s: float | None = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        """The call answered by vLLM's application, with the request's adapter loaded first
        (an adapter this replica does not have is left to vLLM: its 404). With `accept_s`, the
        first chunk comes within that time (response_pieces.py)."""
        adapter = request.adapter
        if adapter is None or self.adapters is None or not self.adapters.serves(adapter):
            async for chunk in self._serve(request, http, accept_s):
                yield chunk
            return
        try:
            await self.adapters.acquire(adapter)
        except AdapterLoadError as err:
            for chunk in _load_failed(request.request_id, str(err)):
                yield chunk
            return
        try:
            async for chunk in self._serve(request, http):
                yield chunk
        finally:
            await self.adapters.release(adapter)

    async def _serve(
        self, request: Request, http: replica_pb2.HttpCall, accept_s: float | None = None
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        rid = request.request_id
        followed = self.client.follow(rid)
        if self.sim_core is not None:
            self.sim_core.requests[rid] = request
        headers = [(h.name, h.value) for h in http.headers if h.name.lower() in PASSED_HEADERS]
        status = 0
        now = time.time()
        meta = engine_metadata(request, now, now - request.arrival_s)
        token = SERVING.set(meta)  # the application's tasks inherit it (engine_client.py)
        last = Piece(None, b"", 0)
        try:
            exchange = Exchange(self.app, http.method, http.path, headers, http.body)
        finally:
            SERVING.reset(token)
        try:
            tokens = lambda: followed.output_tokens  # noqa: E731
            gathered = pieces(
                exchange, tokens, self.interval_s, self.heartbeat_s, accept_s=accept_s
            )
            async for piece in gathered:
                if piece.start is not None:
                    status = piece.start.status
                if piece.last:  # goes on the final chunk, with the counts
                    last = piece
                    break
                yield _chunk(rid, piece)
        finally:
            await exchange.close()
            done = self.client.release(rid)
            if self.sim_core is not None:
                self.sim_core.requests.pop(rid, None)
        reason = done.finish_reason if done is not None else ""
        if not reason:  # no engine call finished: an error, a tokenizer route, an abort
            reason = (
                "error"
                if status >= 400
                else ("abort" if done is None or not done.calls else "stop")
            )
        final = _chunk(rid, last)
        final.output_tokens = done.output_tokens if done is not None else 0
        final.prompt_tokens = done.prompt_tokens if done is not None else 0
        final.finished = True
        final.finish_reason = reason
        yield final

    def status(self) -> EngineStatus:
        if self.sim_core is not None:
            return self.sim_core.engine.status()  # type: ignore[no-any-return]
        return self.client.status(self.model)

    async def evict(self, request_ids: list[str]) -> list[str]:
        """Simulated engines pause the requests (their outputs resume on the same stream);
        vLLM replicas decline: an abort-and-resubmit would not keep the serving classes'
        state (logprobs, stop strings, seeded samples, grammars) whole."""
        if self.sim_core is None:
            return []
        return await self.sim_core.evict(request_ids)  # type: ignore[no-any-return]

    async def resume(self, request_ids: list[str]) -> list[str]:
        if self.sim_core is None:
            return []
        return await self.sim_core.resume(request_ids)  # type: ignore[no-any-return]


def _load_failed(rid: str, message: str) -> list[replica_pb2.ReplicaChunk]:
    """vLLM's answer when an adapter fails to load (its 500 of `/v1/load_lora_adapter`)."""
    from vllm.entrypoints.serve import create_error_response

    body = create_error_response(message, "InternalServerError", HTTPStatus.INTERNAL_SERVER_ERROR)
    now = time.time()
    return [
        replica_pb2.ReplicaChunk(
            request_id=rid,
            http_status=500,
            headers=[replica_pb2.Header(name="content-type", value="application/json")],
            body=body.model_dump_json().encode(),
            time_unix_s=now,
        ),
        replica_pb2.ReplicaChunk(
            request_id=rid, finished=True, finish_reason="error", time_unix_s=now
        ),
    ]


def _chunk(rid: str, piece: Piece) -> replica_pb2.ReplicaChunk:
    """The replica chunk of one piece: the status and headers with the first, the body."""
    chunk = replica_pb2.ReplicaChunk(
        request_id=rid, body=piece.body, output_tokens=piece.output_tokens, time_unix_s=time.time()
    )
    if piece.start is not None:
        chunk.http_status = piece.start.status
        for name, value in piece.start.headers:
            if name.lower() != "content-length":
                chunk.headers.add(name=name, value=value)
    return chunk


def model_dir(path: str) -> str:
    """A model directory with `~` expanded."""
    return str(Path(path).expanduser()) if path.startswith("~") else path


async def vllm_serving(
    engine: Any, served: str, options: ServingOptions, adapters: ReplicaAdapters | None = None
) -> OpenAIServing:
    """vLLM's application over a started `VLLMEngine`'s AsyncLLM."""
    ordered = QUEUE_POLICIES.create(engine.config.queue_policy).deadline_ordered
    listed = engine.config.report_waiting_prefill
    client = SLOEngineClient(engine.llm, engine.kv_total_blocks, engine.stats, ordered, listed)
    app = await build_openai_app(client, engine.config.model, served, options)
    slots = engine.config.max_loras if engine.config.enable_lora else 1
    return OpenAIServing(app, client, served, adapters=_slots(app, client, adapters, slots))


def _slots(
    app: Any, client: SLOEngineClient, adapters: ReplicaAdapters | None, slots: int
) -> AdapterSlots | None:
    if adapters is None or not adapters.specs:
        return None
    specs = {s.name: s for s in adapters.specs}
    return AdapterSlots(specs, slots, app.state.openai_serving_models, client)


async def simulated_serving(
    engine: Any,
    served: str,
    tokenizer_model: str,
    max_model_len: int,
    options: ServingOptions,
    adapters: ReplicaAdapters | None = None,
) -> OpenAIServing:
    """vLLM's application over a SimulatedAsyncLLM playing `engine` (an AsyncSimEngine), with
    the tokenizer, chat template and config of `tokenizer_model` under the name `served`."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    from services.replica.sim_llm import simulated_llm

    # the simulated model's context may exceed the tokenizer model's positions: no weights run
    os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
    path = model_dir(tokenizer_model)
    lora = adapters.engine_settings() if adapters is not None else {}
    args = AsyncEngineArgs(
        model=path, served_model_name=[served], max_model_len=max_model_len, **lora
    )
    load_s = adapters.simulated_load_s if adapters is not None else 0.0
    llm = simulated_llm(args.create_engine_config(), engine, served, load_s)
    client = SLOEngineClient(llm)
    app = await build_openai_app(client, path, served, options)
    slots = _slots(app, client, adapters, adapters.slots if adapters is not None else 1)
    return OpenAIServing(app, client, served, sim_core=llm.engine_core, adapters=slots)
