"""The replica deployment: one engine (vLLM or simulated on the wall clock) behind gRPC.

Thin shell: converts protobuf to the engine interface and back, opens the `execution` span of the
request's trace, and lets Serve cancel the stream when the caller goes away (the engine aborts).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

from ray import serve
from ray.serve import Application

from services.replica.args import ReplicaArgs
from services.replica.build import build_engine, build_host
from services.replica.direct_server import start_server
from services.replica.engine import Engine, EngineRequest
from services.replica.limits import LimitExceeded, check_limits
from services.replica.model_host import ModelNotServed
from services.replica.model_turn import ModelTurn
from services.replica.openai_serving import OpenAIServing, simulated_serving, vllm_serving
from services.replica.slicing import SlicePlan, plan_slice, slice_finish_reason
from services.replica.state_push import StatePusher
from services.replica.streaming import coalesced
from shared.rpc.internal_http import internal_not_found
from shared.rpc.invalid_argument import refuse_invalid, request_or_refuse
from shared.rpc.mesh_auth import require_mesh_credential, require_mesh_token
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2
from shared.telemetry import incoming_context, setup_tracing, tracer


@serve.deployment(max_ongoing_requests=1024)
class ReplicaDeployment:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = ReplicaArgs.model_validate(args)
        if self.args.grpc_host:  # its own gRPC server refuses every call without the credential
            require_mesh_token(f"replica {self.args.application} (its gRPC server, grpc_host)")
        setup_tracing(self.args.application, self.args.tracing)
        self._host = build_host(self.args) if self.args.swap_models else None
        """Several models on one engine (model_host.py); None: `model` for life."""
        self.engine: Engine | None = build_engine(self.args) if self._host is None else None
        self._tracer = tracer("replica")
        self._held: set[str] = set()
        """Requests with an open Generate stream here (reported by Status for reconciliation)."""
        self._pusher = StatePusher(self.args.push_state, self._state)
        if self._host is not None:  # the scheduler hears of a swap's end at once
            self._host.on_swap_end = self._pusher.push_soon
        self._server: Any = None
        self._endpoint = ""
        self._serving: OpenAIServing | None = None
        self._serving_lock = asyncio.Lock()

    async def serving(self) -> OpenAIServing:
        """vLLM's OpenAI application on this replica's engine (built at the first call or health
        check: vLLM's serving state is set up on the replica's event loop)."""
        if self._host is not None:
            while (loaded := await self._host.start()) is None:  # a swap runs: wait for it
                await asyncio.sleep(0.1)
            return loaded.serving
        async with self._serving_lock:
            if self._serving is None:
                a = self.args
                if a.engine == "vllm":
                    self._serving = await vllm_serving(self.engine, a.model, a.serving, a.adapters)
                else:
                    self._serving = await simulated_serving(
                        self.engine,
                        a.model,
                        a.tokenizer_model,
                        a.max_model_len,
                        a.serving,
                        a.adapters,
                    )
                self._serving.interval_s = a.stream_interval_ms / 1e3
                self._serving.client.pace.batch_s = self._serving.interval_s * a.output_gather_share
            return self._serving

    async def Endpoint(self) -> str:
        """This replica's own gRPC server, "host:port" (started at the first call; "" when
        grpc_host is ""): how callers find it, over a Serve handle (direct_server.py)."""
        if self.args.grpc_host and self._server is None:
            self._server, self._endpoint = await start_server(self, self.args.grpc_host)
        return self._endpoint

    async def __call__(self, request: Any) -> Any:
        """HTTP on this internal application's route prefix: 404 (shared/rpc/internal_http.py)."""
        return internal_not_found(self.args.application)

    async def Generate(
        self,
        request: replica_pb2.ReplicaGenerateRequest,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        require_mesh_credential(grpc_context, "replica.Generate")
        meta = request.meta
        parent = incoming_context(grpc_context, trace_headers)
        try:
            check_limits(self.args.limits, meta.max_tokens, meta.priority, request.prompt)
        except LimitExceeded as err:
            refuse_invalid(grpc_context, "replica.Generate", err)
        if self._host is not None and meta.model not in self._host.models:
            who = f"model '{meta.model}' is not served by replica {self.args.application}"
            refuse_invalid(grpc_context, "replica.Generate", ModelNotServed(who))
        # ignore_eos forces the output length to max_tokens (the simulated engine plays it,
        # vLLM runs with SamplingParams.ignore_eos)
        forced = request.simulated_output_tokens or (meta.max_tokens if request.ignore_eos else 0)
        # slice-level serving (slicing.py): this call runs one slice; 0/0 is the whole request
        plan = plan_slice(
            request_or_refuse(meta, grpc_context, "replica.Generate", forced or None),
            request.slice_tokens,
            request.prior_output_tokens,
        )
        resumed_without_ids = plan.prior_output_tokens and not request.context_token_ids
        if resumed_without_ids and self.args.engine == "vllm":
            raise ValueError("context_token_ids: a resumed slice on vLLM needs its context ids")
        self._held.add(meta.request_id)
        self._pusher.start()  # from the first request on (no-op when push_state is off)
        try:
            # accept: the first chunk tells the caller this replica has the request. vLLM's
            # answer on a ready replica sends its first message within a message interval (the
            # accept itself when nothing came by then); else an empty marker goes at once
            serving = self._serving if request.HasField("http") and self._host is None else None
            ready = serving is not None and not serving.loads_adapter(plan.request)
            if not ready:
                yield replica_pb2.ReplicaChunk(request_id=meta.request_id, time_unix_s=time.time())
            if serving is not None and ready:
                accept_s = self.args.stream_interval_ms / 1e3
                async for chunk in self._answer(
                    serving, plan.request, request.http, parent, accept_s
                ):
                    yield chunk
                return
            if request.HasField("http"):
                async for chunk in self._serve_http(plan.request, request.http, parent):
                    yield chunk
                return
            context = list(request.context_token_ids) or None
            async for chunk in self._generate(plan, request.prompt, context, parent):
                yield chunk
        finally:
            self._held.discard(meta.request_id)

    async def _serve_http(
        self, req: Any, http: replica_pb2.HttpCall, parent: Any
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        """An OpenAI call answered by vLLM's application (openai_serving.py); on a replica with
        several models, once the request's model is active (model_host.py)."""
        if self._host is not None:
            async with contextlib.AsyncExitStack() as held:
                turn = ModelTurn(self._host, req.model, held, deadline_s=req.ttft_deadline_abs_s)
                async for _ in turn.wait():  # heartbeats while its model is swapped in
                    yield replica_pb2.ReplicaChunk(
                        request_id=req.request_id, time_unix_s=time.time()
                    )
                async for chunk in self._answer(turn.serving.serving, req, http, parent):
                    yield chunk
            return
        async for chunk in self._answer(await self.serving(), req, http, parent):
            yield chunk

    async def _answer(
        self,
        serving: OpenAIServing,
        req: Any,
        http: replica_pb2.HttpCall,
        parent: Any,
        accept_s: float | None = None,
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        with self._tracer.start_as_current_span("execution", context=parent) as span:
            span.set_attribute("slomesh.replica", self.args.application)
            span.set_attribute("slomesh.engine", self.args.engine)
            span.set_attribute("slomesh.request_id", req.request_id)
            span.set_attribute("slomesh.route", http.path)
            t0 = time.monotonic()
            first = 0.0
            async for chunk in serving.serve(req, http, accept_s):
                if not first and chunk.output_tokens:
                    first = time.monotonic()
                    span.add_event("first_token")
                    wait_ms = (first - t0) * 1e3
                    span.set_attribute("slomesh.queue_and_prefill_ms", wait_ms)
                if chunk.finished:
                    decode_ms = (time.monotonic() - (first or time.monotonic())) * 1e3
                    span.set_attribute("slomesh.decode_ms", decode_ms)
                    span.set_attribute("slomesh.finish_reason", chunk.finish_reason)
                    span.set_attribute("slomesh.output_tokens", chunk.output_tokens)
                yield chunk

    async def _generate(
        self, plan: SlicePlan, prompt: str, context: list[int] | None, parent: Any
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        req, prior = plan.request, plan.prior_output_tokens
        meta_id = req.request_id
        out_ids: list[int] = []
        final: replica_pb2.ReplicaChunk | None = None
        with self._tracer.start_as_current_span("execution", context=parent) as span:
            span.set_attribute("slomesh.replica", self.args.application)
            span.set_attribute("slomesh.engine", self.args.engine)
            span.set_attribute("slomesh.request_id", meta_id)
            n = 0
            t0 = time.monotonic()
            first = t0
            async with contextlib.AsyncExitStack() as held:
                engine = self.engine
                if self._host is not None:  # the request's model stays active while it runs
                    turn = ModelTurn(
                        self._host, req.model, held, deadline_s=req.ttft_deadline_abs_s
                    )
                    async for _ in turn.wait():  # heartbeats while its model is swapped in
                        yield replica_pb2.ReplicaChunk(request_id=meta_id, time_unix_s=time.time())
                    engine = turn.serving.engine
                assert engine is not None
                outputs = engine.generate(
                    EngineRequest(req, prompt_token_ids=context)
                    if context
                    else EngineRequest(req, prompt=prompt)
                )
                async for chunk in coalesced(outputs, self.args.stream_interval_ms / 1e3):
                    if n == 0 and chunk.num_output_tokens > 0:
                        first = time.monotonic()
                        span.add_event("first_token")
                        # queue wait + prefill: the engine interface reports no finer split
                        span.set_attribute("slomesh.queue_and_prefill_ms", (first - t0) * 1e3)
                    if chunk.finished:
                        span.set_attribute("slomesh.decode_ms", (time.monotonic() - first) * 1e3)
                        span.set_attribute("slomesh.finish_reason", chunk.finish_reason or "")
                    n = chunk.num_output_tokens
                    text = chunk.text or "".join(f" t{t}" for t in chunk.token_ids)
                    reason = slice_finish_reason(plan, chunk.finish_reason or "")
                    out = replica_pb2.ReplicaChunk(
                        request_id=meta_id,
                        text=text,
                        output_tokens=prior + chunk.num_output_tokens,
                        finished=chunk.finished,
                        finish_reason=reason,
                        time_unix_s=time.time(),
                    )
                    if plan.capped:
                        out_ids.extend(chunk.token_ids)
                        if reason == "slice" and chunk.prompt_token_ids is not None:
                            out.context_token_ids.extend([*chunk.prompt_token_ids, *out_ids])
                        if chunk.finished:  # sent once the engine let the id go: the next
                            final = out  # slice of this request may come back here at once
                            continue
                    yield out
            span.set_attribute("slomesh.output_tokens", n)
        if final is not None:
            yield final

    async def Evict(
        self,
        request: replica_pb2.RequestIds,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> replica_pb2.RequestIds:
        require_mesh_credential(grpc_context, "replica.Evict")
        if self._host is not None and self._host.swapping:
            return replica_pb2.RequestIds()  # nothing runs while a replica swaps models
        done = await (await self.serving()).evict(list(request.request_ids))
        return replica_pb2.RequestIds(request_ids=done)

    async def SwapModel(
        self,
        request: replica_pb2.ModelSwapOrder,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> replica_pb2.ModelSwapOrder:
        """The scheduler's swap: make `model` active once the requests held are done."""
        require_mesh_credential(grpc_context, "replica.SwapModel")
        if self._host is None:
            if request.model != self.args.model:
                who = (
                    f"model: '{request.model}' is not served by replica "
                    f"{self.args.application} (it serves '{self.args.model}' only)"
                )
                refuse_invalid(grpc_context, "replica.SwapModel", ModelNotServed(who))
            return replica_pb2.ModelSwapOrder(model=self.args.model)
        await self._host.start()
        try:
            self._host.swap_to(request.model)
        except ModelNotServed as err:  # the caller's fault: INVALID_ARGUMENT, not INTERNAL
            refuse_invalid(grpc_context, "replica.SwapModel", err)
        return replica_pb2.ModelSwapOrder(model=self._host.target)

    async def SwapLog(self, grpc_context: Any = None) -> dict[str, Any]:
        """The swaps this replica made since it started, as measured (model_host.py: from,
        to, seconds, ok), and the requests a failed swap answered with an error: what a bench
        reports of a live run (a Serve-handle call, not a gRPC method)."""
        require_mesh_credential(grpc_context, "replica.SwapLog")
        if self._host is None:
            return {"swaps": [], "failed_requests": 0}
        return {
            "swaps": [dataclasses.asdict(s) for s in self._host.swaps],
            "failed_requests": self._host.failed_requests,
        }

    async def Resume(
        self,
        request: replica_pb2.RequestIds,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> replica_pb2.RequestIds:
        require_mesh_credential(grpc_context, "replica.Resume")
        done = await (await self.serving()).resume(list(request.request_ids))
        return replica_pb2.RequestIds(request_ids=done)

    async def Status(
        self,
        request: replica_pb2.StatusQuery,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> common_pb2.ReplicaState:
        require_mesh_credential(grpc_context, "replica.Status")
        await self._ready()  # answered once vLLM's application is set up: the scheduler's
        return self._state()  # readiness (a replica takes work after its first answer)

    async def _ready(self) -> None:
        """vLLM's application set up (a replica with several models: its first model loaded;
        a swap under way does not hold Status or the health check back)."""
        if self._host is not None:
            await self._host.start()
        else:
            await self.serving()

    def _state(self) -> common_pb2.ReplicaState:
        """The engine's state as reported to the scheduler (Status, UpdateReplica)."""
        if self._host is not None:
            st = self._host.status()
        elif self._serving is not None:
            st = self._serving.status()
        else:
            assert self.engine is not None
            st = self.engine.status()
        return common_pb2.ReplicaState(
            replica=common_pb2.ReplicaRef(
                application=self.args.application, gpu=self.args.gpu, model=self.args.model
            ),
            active_model=st.active_model or "",
            waiting=st.waiting,
            running=st.running,
            evicted=st.evicted,
            kv_used_blocks=st.kv_used_blocks,
            kv_total_blocks=st.kv_total_blocks,
            engine=self.args.engine,
            request_ids=sorted(self._held),
            pending_prefill_tokens=st.pending_prefill_tokens,
            waiting_prefill=[
                common_pb2.WaitingPrefill(ttft_deadline_unix_s=due, tokens=tokens)
                for due, tokens in st.waiting_prefill
            ],
            deadline_ordered=st.deadline_ordered,
            swapping=st.swapping,
            loaded_adapters=self._serving.adapter_names() if self._serving is not None else [],
        )

    async def check_health(self) -> None:
        """Serve health check: vLLM's application is set up and the engine answers a status
        query."""
        await self._ready()
        self._state()


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.replica.deployment:build_app`)."""
    parsed = ReplicaArgs.model_validate(args)
    deployment = ReplicaDeployment.options(  # type: ignore[attr-defined]
        max_ongoing_requests=parsed.max_ongoing_requests
    )
    app: Application = deployment.bind(parsed.model_dump(mode="json"))
    return app
