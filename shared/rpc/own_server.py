"""A service's own gRPC server for its unary methods, beside its Serve deployment.

A call over a Serve handle costs the callee Serve's per-call work (a Ray task, its arguments
pickled, Serve's request wrapper) on top of the method: for a method called tens of times a
second with little to do, such as the scheduler's `Sync`, that is most of its CPU. A service
that serves its own gRPC server lets mesh callers reach it directly instead (MeshClient:
shared/rpc/client.py, shared/rpc/direct.py), the way replicas serve their streams.

`start_unary_server` serves every method of a generated servicer (`<Name>Servicer` of a
`*_pb2_grpc` module) by calling the deployment's method of the same name with the call's
context (`method(request, grpc_context=context)`), on a free port of `host_setting` (an
address, or "node": this Ray node's address). Every call must carry the mesh credential
(shared/rpc/mesh_auth.py): UNAUTHENTICATED without it. A status the method set on the context
before it raised (INVALID_ARGUMENT naming the field, ...) is the call's status; any other
exception is the status a Serve handle caller would have seen (shared/rpc/call_errors.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any

import grpc

from shared.rpc.call_errors import status_of
from shared.rpc.direct import KEEPALIVE_SERVER_OPTIONS
from shared.rpc.mesh_auth import MESH_TOKEN_METADATA, credential_ok

REFUSED = (
    f"internal to the mesh: send the mesh credential in metadata '{MESH_TOKEN_METADATA}'; "
    "clients call the ingress"
)


def bind_host(setting: str) -> str:
    """The address to bind: "node" is this Ray node's IP, anything else is taken as is."""
    if setting != "node":
        return setting
    import ray

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _method(
    deployment: Any, service: str, name: str
) -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if not credential_ok(context):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{service}.{name} is {REFUSED}")
        try:
            return await getattr(deployment, name)(request, grpc_context=context)
        except Exception as err:  # the status a handle caller would have seen
            code = context.code()
            if code is None or code == grpc.StatusCode.OK:
                code = grpc.StatusCode[status_of(err)]
            details = context.details()
            text = details.decode() if isinstance(details, bytes) else details
            await context.abort(code, text or f"{type(err).__name__}: {err}")
            raise  # not reached: abort raises

    return call


def servicer(deployment: Any, grpc_module: ModuleType, service: str) -> Any:
    """A `<service>Servicer` whose every method calls `deployment`'s (module docstring)."""
    base = getattr(grpc_module, f"{service}Servicer")
    names = [n for n, v in vars(base).items() if n[:1].isupper() and callable(v)]
    methods = {n: staticmethod(_method(deployment, service.lower(), n)) for n in names}
    return type(f"Own{service}Servicer", (base,), methods)()


async def start_unary_server(
    deployment: Any, grpc_module: ModuleType, service: str, host_setting: str
) -> tuple[grpc.aio.Server, str]:
    """Serve `deployment`'s methods of `service` on a free port; returns the server and
    "host:port"."""
    host = bind_host(host_setting)
    server = grpc.aio.server(options=KEEPALIVE_SERVER_OPTIONS)
    add = getattr(grpc_module, f"add_{service}Servicer_to_server")
    add(servicer(deployment, grpc_module, service), server)
    port = server.add_insecure_port(f"{host}:0")
    await server.start()
    return server, f"{host}:{port}"
