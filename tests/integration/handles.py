"""Internal services of the live mesh, called the way its own services call them: over Serve
deployment handles from the test process (the mesh's Ray driver). Serve's gRPC proxy, which
tests once used for this, is off by default."""

from __future__ import annotations

import asyncio
from typing import Any


async def _call(application: str, method: str, message: Any, timeout_s: float) -> Any:
    from ray import serve

    handle = serve.get_app_handle(application)  # the mesh's handles route on the caller's loop
    response = getattr(handle, method).remote(message, trace_headers={})
    return await asyncio.wait_for(response, timeout_s)


class HandleStub:
    """A gRPC-stub look-alike over a Serve application handle: `stub.Status(message,
    timeout=10)` calls the deployment's method and returns its reply."""

    def __init__(self, application: str) -> None:
        self.application = application

    def __getattr__(self, method: str) -> Any:
        def call(message: Any, metadata: Any = None, timeout: float = 10.0) -> Any:
            return asyncio.run(_call(self.application, method, message, timeout))

        return call


def engine_load(applications: tuple[str, ...]) -> int:
    """Requests running or waiting in the engines of `applications` (replica.Status)."""
    from shared.rpc.slomesh.v1 import replica_pb2

    total = 0
    for application in applications:
        st = HandleStub(application).Status(replica_pb2.StatusQuery())
        total += st.running + st.waiting
    return total
