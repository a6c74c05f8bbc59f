"""Direct gRPC streams to a replica's own server (the server is
services/replica/direct_server.py), and unary calls to a scheduler's own server
(services/scheduler/own_server.py, shared/rpc/own_server.py): the address is asked once per
application, over a Serve handle (`Endpoint`), and one channel is kept per address. An
application that publishes no server ("", e.g. an autoscaled pool, where Serve's router picks
the replica) or cannot be asked keeps the handle. A server that fails UNAVAILABLE is forgotten
and asked for again (it may have been replaced, on a new port); MeshClient.stream retries a
stream that failed before its first message once on the new address. A replica's Generate
streams share one long-lived `Streams` call per address (replica_streams.py).

Channels send HTTP/2 keepalive pings (`KEEPALIVE_CHANNEL_OPTIONS`): a replica whose process is
frozen or whose node vanished without closing the connection (no FIN, no RST) is found within
keepalive_time + keepalive_timeout while a stream waits on it, and the stream fails UNAVAILABLE
instead of hanging until the TCP retransmission timeout (minutes). Pings are answered by gRPC's
own threads, so a replica whose event loop hangs still answers them: the stream's idle timeout
(MeshClient.stream_idle_timeout_s) covers that case.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from shared.rpc.mesh_auth import credential_metadata
from shared.rpc.replica_streams import StreamsCall
from shared.rpc.slomesh.v1 import replica_pb2_grpc, scheduler_pb2_grpc

DIRECT_STUBS: dict[str, Any] = {
    "replica": replica_pb2_grpc.ReplicaStub,
    "scheduler": scheduler_pb2_grpc.SchedulerStub,
}
"""The service kinds that may publish their own server (`Endpoint`), and their stubs."""

_RETRY_S = 5.0
"""After a failed or empty answer, how long the handle is used before asking again."""

KEEPALIVE_TIME_MS = 20_000
"""A channel with a call in flight pings the server after this long without a frame."""
KEEPALIVE_TIMEOUT_MS = 10_000
"""A ping unanswered for this long closes the channel (its calls fail UNAVAILABLE)."""

KEEPALIVE_CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    # no pings on an idle channel: servers refuse them by default (GOAWAY too_many_pings)
    ("grpc.keepalive_permit_without_calls", 0),
)
"""Options of every direct channel. The client sends at most two pings between data frames
(gRPC's default `grpc.http2.max_pings_without_data`), which a server with gRPC's default ping
policy accepts; a server with KEEPALIVE_SERVER_OPTIONS accepts them as often as sent."""

UNLIMITED_MESSAGES: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
)
"""Options of a direct channel to a replica and of the replica's server: one `Replica.Streams`
message carries every request's messages that are ready (replica_streams.py), so several
prompts or response bodies together may pass gRPC's 4 MiB default per message (which would
fail the call and every stream on it); the callers hold the mesh credential."""

KEEPALIVE_SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.http2.max_ping_strikes", 0),  # 0: never GOAWAY a client for pinging
)
"""Options of the mesh's own gRPC servers: accept the channels' keepalive pings."""


class DirectReplicas:
    def __init__(self, resolve: Callable[[str], Awaitable[str]]) -> None:
        self._resolve = resolve
        self._addresses: dict[str, str] = {}
        self._no_server_until: dict[str, float] = {}
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        self._streams: dict[str, StreamsCall] = {}

    async def stub(self, application: str, kind: str = "replica") -> Any | None:
        """A stub of service `kind` on `application`'s own server, or None (use the
        handle)."""
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
        stub = self._stubs.get((address, kind))
        if stub is None:
            channel = self._channels.get(address)
            if channel is None:
                channel = grpc.aio.insecure_channel(
                    address, options=(*KEEPALIVE_CHANNEL_OPTIONS, *UNLIMITED_MESSAGES)
                )
                self._channels[address] = channel
            stub = self._stubs[(address, kind)] = DIRECT_STUBS[kind](channel)
        return stub

    async def streams(self, application: str) -> StreamsCall | None:
        """The `Replica.Streams` call to `application`'s own server that carries its Generate
        streams (shared/rpc/replica_streams.py; a new one when the last one failed), or None
        (use the handle)."""
        stub = await self.stub(application)
        if stub is None:
            return None
        address = self._addresses[application]
        call = self._streams.get(address)
        if call is None or not call.alive:
            call = self._streams[address] = StreamsCall(stub, credential_metadata())
        return call

    def forget(self, application: str) -> str | None:
        """`application`'s server failed: ask for its address again next time. Returns the
        address it had (None: none was known)."""
        return self._addresses.pop(application, None)

    def address(self, application: str) -> str | None:
        """The address `application`'s stub uses now (None: none known, the handle is used)."""
        return self._addresses.get(application)

    async def close(self) -> None:
        for call in self._streams.values():
            call.close()
            await call.wait_closed()
        self._streams = {}
        for channel in self._channels.values():
            await channel.close()
        self._channels, self._stubs, self._addresses = {}, {}, {}
