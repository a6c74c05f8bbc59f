"""Direct gRPC streams to a replica's own server (the server is
services/replica/direct_server.py): the address is asked once per application, over a Serve
handle (`Endpoint`), and one channel is kept per address. An application that publishes no
server ("", e.g. an autoscaled pool, where Serve's router picks the replica) or cannot be asked
keeps the handle. A replica that fails UNAVAILABLE is forgotten and asked for again (it may
have been replaced, on a new port); MeshClient.stream retries a stream that failed before its
first message once on the new address.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from shared.rpc.slomesh.v1 import replica_pb2_grpc

_RETRY_S = 5.0
"""After a failed or empty answer, how long the handle is used before asking again."""


class DirectReplicas:
    def __init__(self, resolve: Callable[[str], Awaitable[str]]) -> None:
        self._resolve = resolve
        self._addresses: dict[str, str] = {}
        self._no_server_until: dict[str, float] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, Any] = {}

    async def stub(self, application: str) -> Any | None:
        """A Replica stub on `application`'s own server, or None (use the handle)."""
        address = self._addresses.get(application)
        if address is None:
            if time.monotonic() < self._no_server_until.get(application, 0.0):
                return None
            try:
                address = await self._resolve(application)
            except Exception:
                address = ""
            if not address:
                self._no_server_until[application] = time.monotonic() + _RETRY_S
                return None
            self._addresses[application] = address
        stub = self._stubs.get(address)
        if stub is None:
            channel = grpc.aio.insecure_channel(address)
            self._channels[address] = channel
            stub = self._stubs[address] = replica_pb2_grpc.ReplicaStub(channel)  # type: ignore[no-untyped-call]
        return stub

    def forget(self, application: str) -> str | None:
        """`application`'s server failed: ask for its address again next time. Returns the
        address it had (None: none was known)."""
        return self._addresses.pop(application, None)

    def address(self, application: str) -> str | None:
        """The address `application`'s stub uses now (None: none known, the handle is used)."""
        return self._addresses.get(application)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels, self._stubs, self._addresses = {}, {}, {}
