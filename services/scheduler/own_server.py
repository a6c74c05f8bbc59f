"""The scheduler's own gRPC server: ingresses and replicas call its methods (`Sync` above all,
tens of times a second) on it directly instead of over a Serve handle, whose per-call work
was most of the scheduler's CPU per admission (shared/rpc/own_server.py).

`Endpoint` starts it at the first call, on a free port of `grpc_host`, and answers "host:port";
"" (callers keep the handle) when `grpc_host` is "" or the process has no mesh secret, since
every call to the server must carry the mesh credential. A mixin of SchedulerDeployment.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.scheduler.args import SchedulerArgs
from shared.rpc.mesh_auth import mesh_token
from shared.rpc.own_server import start_unary_server
from shared.rpc.slomesh.v1 import scheduler_pb2_grpc


class OwnServer:
    args: SchedulerArgs
    _own_server: Any = None
    _own_endpoint: str = ""
    _own_lock: asyncio.Lock | None = None

    async def Endpoint(self) -> str:
        """This scheduler's own gRPC server, "host:port" ("" for none: use the handle)."""
        if not self.args.grpc_host or mesh_token() is None:
            return ""
        if self._own_lock is None:
            self._own_lock = asyncio.Lock()
        async with self._own_lock:
            if self._own_server is None:
                self._own_server, self._own_endpoint = await start_unary_server(
                    self, scheduler_pb2_grpc, "Scheduler", self.args.grpc_host
                )
        return self._own_endpoint
