"""How one slomesh service calls another, with the protobuf contracts either way.

Two transports, chosen in config:
- "handle" (default): a Serve deployment handle, a direct actor call inside the cluster,
  protected by Ray's token authentication. It skips the proxy hop.
- "grpc": real gRPC through Serve's gRPC proxy, `application` metadata picking the service,
  carrying the mesh credential. Serve's gRPC proxy is off unless the mesh config turns it on
  (`grpc_options.grpc_servicer_functions`; it binds every interface), so this transport needs a
  config that asks for it; `slomesh up` refuses one that does not.
The trace context travels as W3C headers in both: gRPC metadata, or a `trace_headers` argument.

Failures become `CallFailed` with a gRPC status name (`call_errors.status_of`): UNAVAILABLE only
for a callee that is gone or not up (retryable), the callee's own exceptions as the
deterministic statuses they are. A stream that sends nothing for `stream_idle_timeout_s` (a
replica that hangs without dying) fails DEADLINE_EXCEEDED and is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Literal

import grpc

from shared.rpc.call_errors import status_of
from shared.rpc.direct import KEEPALIVE_CHANNEL_OPTIONS, DirectReplicas
from shared.rpc.mesh_auth import credential_metadata
from shared.rpc.replica_streams import StreamFailed, StreamsCall
from shared.rpc.slomesh.v1 import (
    deployer_pb2_grpc,
    predictor_pb2_grpc,
    profiler_pb2_grpc,
    replica_pb2_grpc,
    scheduler_pb2_grpc,
)
from shared.telemetry import grpc_metadata, trace_headers

Transport = Literal["handle", "grpc"]

_STUBS: dict[str, Any] = {
    "predictor": predictor_pb2_grpc.PredictorStub,
    "profiler": profiler_pb2_grpc.ProfilerStub,
    "scheduler": scheduler_pb2_grpc.SchedulerStub,
    "deployer": deployer_pb2_grpc.DeployerStub,
    "replica": replica_pb2_grpc.ReplicaStub,
}


DIRECT_UNARY = frozenset({"scheduler"})
"""Service kinds whose unary calls go to the service's own gRPC server when it publishes one
(its `Endpoint`; shared/rpc/direct.py), for callers inside the cluster (transport "handle",
which asks for the address over a handle)."""

DEFAULT_STREAM_IDLE_TIMEOUT_S = 60.0
"""How long a stream may go without a message before it fails (see MeshClient)."""


class CallFailed(Exception):
    """A call to another service failed; `code` is a gRPC status name (UNAVAILABLE, ...)."""

    def __init__(self, application: str, code: str, detail: str = "") -> None:
        super().__init__(f"{application}: {code} {detail}".strip())
        self.application = application
        self.code = code


class MeshClient:
    def __init__(
        self,
        target: str = "127.0.0.1:9000",
        timeout_s: float = 10.0,
        transport: Transport = "handle",
        stream_idle_timeout_s: float | None = DEFAULT_STREAM_IDLE_TIMEOUT_S,
    ) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self.transport = transport
        self.stream_idle_timeout_s = stream_idle_timeout_s
        """A stream with no message for this long fails DEADLINE_EXCEEDED (None: no limit)."""
        self._channel: grpc.aio.Channel | None = None
        self._stubs: dict[str, Any] = {}
        self._handles: dict[str, Any] = {}
        self._methods: dict[tuple[str, str, bool], Any] = {}
        self.direct = DirectReplicas(self._endpoint)
        """Replica streams straight to the replica's own gRPC server (shared/rpc/direct.py)
        when it publishes one; else the transport above."""

    async def call(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        timeout_s: float | None = None,
    ) -> Any:
        """Unary call of `method` on the service `application` (of service kind `kind`).

        Fails with CallFailed(DEADLINE_EXCEEDED) after `timeout_s` (default: the client's) on
        either transport; the callee's work is cancelled."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            if kind in DIRECT_UNARY and self.transport == "handle":
                t0 = time.monotonic()
                async with asyncio.timeout(timeout):  # asking for the address counts too
                    stub = await self.direct.stub(application, kind)
                if stub is not None:
                    left = max(timeout - (time.monotonic() - t0), 1e-3)
                    return await self._direct_call(application, stub, method, message, left)
            if self.transport == "grpc":
                return await getattr(self._stub(kind), method)(
                    message,
                    metadata=grpc_metadata([("application", application), *credential_metadata()]),
                    timeout=timeout,
                )
            response = self._method(application, method).remote(message, trace_headers=_headers())
            async with asyncio.timeout(timeout):
                return await _result(response)
        except TimeoutError:
            raise CallFailed(application, "DEADLINE_EXCEEDED", f"after {timeout:g} s") from None
        except grpc.aio.AioRpcError as err:
            raise CallFailed(application, err.code().name, err.details() or "") from None
        except Exception as err:
            raise CallFailed(application, status_of(err), type(err).__name__) from None

    async def _direct_call(
        self, application: str, stub: Any, method: str, message: Any, timeout: float
    ) -> Any:
        """A unary call on the service's own server; UNAVAILABLE forgets its address (it may
        have been replaced, on a new port: the next call asks again)."""
        metadata = [*credential_metadata(), *_headers().items()]
        try:
            return await getattr(stub, method)(message, metadata=metadata, timeout=timeout)
        except grpc.aio.AioRpcError as err:
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                self.direct.forget(application)
            raise

    async def stream(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        trace_headers: dict[str, str] | None = None,
    ) -> AsyncIterator[Any]:
        """Server-streaming call; closing the iterator cancels the call (the callee aborts).

        The generator body runs at the first iteration, so the caller passes the trace context
        it had when it decided to call (`trace_headers`, default: the current one at that time).
        """
        headers = trace_headers if trace_headers is not None else _headers()
        idle = self.stream_idle_timeout_s
        try:
            source, stop = await self._open_stream(application, kind, method, message, headers)
            try:
                while True:
                    try:
                        async with asyncio.timeout(idle):
                            item = await anext(source)
                    except StopAsyncIteration:
                        return
                    yield item
            finally:
                stopped = stop()  # at once: it cancels the callee's stream
                if inspect.isawaitable(stopped):
                    await stopped
        except TimeoutError:
            raise CallFailed(
                application, "DEADLINE_EXCEEDED", f"no message for {idle:g} s"
            ) from None
        except grpc.aio.AioRpcError as err:
            raise CallFailed(application, err.code().name, err.details() or "") from None
        except (GeneratorExit, CallFailed):
            raise
        except Exception as err:
            raise CallFailed(application, status_of(err), type(err).__name__) from None

    async def _open_stream(
        self,
        application: str,
        kind: str,
        method: str,
        message: Any,
        headers: dict[str, str],
    ) -> tuple[AsyncIterator[Any], Callable[[], Any]]:
        """The stream's messages and how to end it early (its result may be awaitable)."""
        if kind == "replica" and method == "Generate":
            call = await self.direct.streams(application)
            if call is not None:
                inner = self._direct_stream(application, call, message, headers)
                return inner, inner.aclose
        if self.transport == "grpc":
            call = getattr(self._stub(kind), method)(
                message,
                metadata=[("application", application), *credential_metadata(), *headers.items()],
            )
            return call.__aiter__(), call.cancel
        gen = self._method(application, method, stream=True).remote(message, trace_headers=headers)
        return gen.__aiter__(), gen.cancel

    async def _endpoint(self, application: str) -> str:
        """An application's own gRPC server, asked over its Serve handle."""
        response = self._handle(application).Endpoint.remote()
        async with asyncio.timeout(self.timeout_s):
            return str(await _result(response))

    def _stub(self, kind: str) -> Any:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(
                self.target, options=KEEPALIVE_CHANNEL_OPTIONS
            )
        if kind not in self._stubs:
            self._stubs[kind] = _STUBS[kind](self._channel)
        return self._stubs[kind]

    def _method(self, application: str, method: str, stream: bool = False) -> Any:
        """`application`'s handle bound to `method` (streaming or not), made once: a handle's
        `options` and attribute access build a new handle at every call."""
        key = (application, method, stream)
        bound = self._methods.get(key)
        if bound is None:
            handle = self._handle(application)
            bound = getattr(handle.options(stream=True) if stream else handle, method)
            self._methods[key] = bound
        return bound

    def _handle(self, application: str) -> Any:
        if application not in self._handles:
            from ray import serve

            self._handles[application] = serve.get_app_handle(application)
        return self._handles[application]

    async def _direct_stream(
        self,
        application: str,
        call: StreamsCall,
        message: Any,
        headers: dict[str, str],
    ) -> AsyncGenerator[Any, None]:
        """A Generate stream from the replica's own server, on its shared Streams call
        (replica_streams.py). UNAVAILABLE before the first message with an address that has
        changed since (Serve replaced the replica, on a new port) is retried once there: a stale
        address is not a dead replica. Any other failure is the caller's."""
        for attempt in range(2):
            started = False
            try:
                async with contextlib.aclosing(call.stream(message, headers)) as chunks:
                    async for item in chunks:
                        started = True
                        yield item
                return
            except StreamFailed as err:
                failed = CallFailed(application, err.status, err.detail)
                if err.status != "UNAVAILABLE":
                    raise failed from None
                stale = self.direct.forget(application)  # replaced? ask for it again
                if started or attempt:
                    raise failed from None
                fresh = await self.direct.streams(application)
                if fresh is None or self.direct.address(application) == stale:
                    raise failed from None
                call = fresh

    async def close(self) -> None:
        await self.direct.close()
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
            self._stubs = {}


async def _result(response: Any) -> Any:
    return await response


def _headers() -> dict[str, str]:
    return trace_headers()
