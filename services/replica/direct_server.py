"""The replica's own gRPC server: callers stream `Generate` from it directly instead
of relaying through a Serve handle (one actor-call hop less per request and per message), all of
a caller's requests on one `Streams` call (stream_mux.py).

Bound to the replica's `grpc_host` (loopback by default; "node": this node's address, for
callers on other nodes) on a free port, and published through Serve: the deployment's
`Endpoint` method, called over a Serve handle, answers "host:port" ("" when the replica serves
no own server: callers keep using the handle). Every method requires the mesh credential
(shared/rpc/mesh_auth.py), as through Serve's proxy: UNAUTHENTICATED without it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from services.replica.stream_mux import serve_streams
from shared.rpc.direct import KEEPALIVE_SERVER_OPTIONS, UNLIMITED_MESSAGES
from shared.rpc.mesh_auth import MESH_TOKEN_METADATA, credential_ok
from shared.rpc.own_server import bind_host
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, replica_pb2_grpc

_REFUSED = (
    f"internal to the mesh: send the mesh credential in metadata '{MESH_TOKEN_METADATA}'; "
    "clients call the ingress"
)


class _Servicer(replica_pb2_grpc.ReplicaServicer):
    """The deployment's methods behind a real gRPC server (the deployment is the shell)."""

    def __init__(self, deployment: Any) -> None:
        self.d = deployment

    async def Generate(
        self, request: replica_pb2.ReplicaGenerateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[replica_pb2.ReplicaChunk]:
        if not credential_ok(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"replica.Generate is {_REFUSED}")
        try:
            async for chunk in self.d.Generate(request, grpc_context=context):
                yield chunk
        except ValueError as err:  # the replica's limits (limits.py)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(err))

    async def Streams(
        self,
        request_iterator: AsyncIterator[replica_pb2.StreamsUp],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[replica_pb2.StreamsDown]:
        """Many Generate calls on one stream (stream_mux.py)."""
        if not credential_ok(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"replica.Streams is {_REFUSED}")
        metadata = [(k, v) for k, v in context.invocation_metadata() or () if isinstance(v, str)]
        async for down in serve_streams(self.d.Generate, request_iterator, metadata):
            yield down

    async def _unary(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """The deployment's own `method`, for callers with the mesh credential."""
        if not credential_ok(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"replica.{method} is {_REFUSED}")
        return await getattr(self.d, method)(request, grpc_context=context)

    async def Evict(
        self, request: replica_pb2.RequestIds, context: grpc.aio.ServicerContext
    ) -> replica_pb2.RequestIds:
        result: replica_pb2.RequestIds = await self._unary("Evict", request, context)
        return result

    async def Resume(
        self, request: replica_pb2.RequestIds, context: grpc.aio.ServicerContext
    ) -> replica_pb2.RequestIds:
        result: replica_pb2.RequestIds = await self._unary("Resume", request, context)
        return result

    async def SwapModel(
        self, request: replica_pb2.ModelSwapOrder, context: grpc.aio.ServicerContext
    ) -> replica_pb2.ModelSwapOrder:
        result: replica_pb2.ModelSwapOrder = await self._unary("SwapModel", request, context)
        return result

    async def Status(
        self, request: replica_pb2.StatusQuery, context: grpc.aio.ServicerContext
    ) -> common_pb2.ReplicaState:
        result: common_pb2.ReplicaState = await self._unary("Status", request, context)
        return result


async def start_server(deployment: Any, host_setting: str) -> tuple[grpc.aio.Server, str]:
    """Start the replica's server on a free port of `host_setting`; returns it and host:port."""
    host = bind_host(host_setting)
    server = grpc.aio.server(options=(*KEEPALIVE_SERVER_OPTIONS, *UNLIMITED_MESSAGES))
    replica_pb2_grpc.add_ReplicaServicer_to_server(_Servicer(deployment), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(f"{host}:0")
    await server.start()
    return server, f"{host}:{port}"
