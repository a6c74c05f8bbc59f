"""The ingress replica's own gRPC server: the `Ingress` service without Serve's gRPC proxy.

Serve's gRPC proxy binds every interface (`[::]:<grpc_options.port>`) and routes any caller to
any application by its `application` metadata; it has no host setting. So each ingress replica
serves `Ingress.Generate` itself, on `grpc_door.host:grpc_door.port` (127.0.0.1:9100 by
default), on a socket every ingress replica of the node shares (SO_REUSEPORT, gRPC's default on
Linux; the kernel spreads connections over them), on the replica's own event loop, like the HTTP
front door (front_door.py). Serve's gRPC proxy is off unless the mesh config asks for it.

The servicer calls the deployment's own `Generate`, the method Serve's proxy called: API keys
(`authorization` metadata, checked as HTTP checks them), validation, admission and streaming are
one implementation. An `APIError` becomes its gRPC status (401 UNAUTHENTICATED, 400
INVALID_ARGUMENT, 429 RESOURCE_EXHAUSTED, ...) with its message; a failure the deployment already
put on the context (its status code) keeps that status.

Overload: past `max_in_flight_requests` calls on a replica, gRPC answers RESOURCE_EXHAUSTED at
once (`maximum_concurrent_rpcs`). Shutdown: the app's lifespan end (Serve stopping the replica)
stops the server: no new calls, calls in flight get `graceful_shutdown_s`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from services.ingress.core.errors import APIError
from services.ingress.core.grpc_door import GrpcDoorConfig
from services.ingress.front_door import bind_address
from shared.rpc.direct import KEEPALIVE_SERVER_OPTIONS
from shared.rpc.slomesh.v1 import ingress_pb2, ingress_pb2_grpc

log = logging.getLogger("slomesh.ingress")

_STATUS = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.NOT_FOUND,
    413: grpc.StatusCode.INVALID_ARGUMENT,
    429: grpc.StatusCode.RESOURCE_EXHAUSTED,
    503: grpc.StatusCode.UNAVAILABLE,
}


def grpc_status(http_status: int) -> grpc.StatusCode:
    """The gRPC status of an HTTP error status (INTERNAL for the rest)."""
    return _STATUS.get(http_status, grpc.StatusCode.INTERNAL)


class IngressServicer(ingress_pb2_grpc.IngressServicer):
    """`Ingress.Generate` over the deployment's own `Generate` (module docstring)."""

    def __init__(self, deployment: Any) -> None:
        self.d = deployment

    async def Generate(
        self, request: ingress_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ingress_pb2.GenerateChunk]:
        try:
            async for chunk in self.d.Generate(request, grpc_context=context):
                yield chunk
        except APIError as err:
            await context.abort(grpc_status(err.status), err.message)
        except grpc.aio.AbortError:
            raise
        except Exception as err:
            code = context.code()  # the deployment set the status before its raise
            if code is None or code == grpc.StatusCode.OK:
                log.exception("unexpected error serving Ingress.Generate")
                await context.abort(
                    grpc.StatusCode.INTERNAL, f"internal error: {type(err).__name__}"
                )
            await context.abort(code, context.details() or str(err))


def open_server(deployment: Any, config: GrpcDoorConfig, limit: int) -> tuple[grpc.aio.Server, str]:
    """A gRPC server for `deployment` bound to the configured address (not started yet); a
    port another program holds fails naming the field."""
    host = bind_address(config.host)
    server = grpc.aio.server(
        options=[("grpc.so_reuseport", 1), *KEEPALIVE_SERVER_OPTIONS],
        maximum_concurrent_rpcs=limit,
    )
    ingress_pb2_grpc.add_IngressServicer_to_server(IngressServicer(deployment), server)  # type: ignore[no-untyped-call]
    address = f"[{host}]:{config.port}" if ":" in host else f"{host}:{config.port}"
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port != config.port:
        raise RuntimeError(
            f"grpc_door: cannot listen on {address}; another program holds the port: stop it "
            "or set the ingress's grpc_door.port"
        )
    return server, address


class GrpcDoor:
    """One replica's gRPC server: bound at construction (a taken port fails the replica at
    start), serving once `start` runs on the replica's event loop."""

    def __init__(self, deployment: Any, config: GrpcDoorConfig, limit: int) -> None:
        self.config = config
        self.server, self.address = open_server(deployment, config, limit)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Serve on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        await self.server.start()
        log.info("gRPC door serving on %s", self.address)

    async def stop(self) -> None:
        """Stop accepting, give calls in flight graceful_shutdown_s, close."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self.server.stop(self.config.graceful_shutdown_s)
