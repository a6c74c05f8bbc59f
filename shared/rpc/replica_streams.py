"""Many replica streams on one gRPC call: the caller's side of `Replica.Streams`.

A `Replica.Generate` call per request costs the caller and the replica a call's set-up and
tear-down (headers, the call's own completion-queue events, a wake-up of each side's gRPC
thread) on top of its messages. `StreamsCall` keeps one long-lived `Streams` call per replica
server instead and carries every request on it: a request's Generate goes up as a
`StreamOpen` with a stream id of this call, its chunks come down as `StreamEvent`s with that
id, and closing its stream early sends its id in `cancel` (the replica aborts the request, as
on a cancelled Generate). Each side sends everything that is ready when its sender runs as one
message (opens and cancels up, every request's chunks down): with several requests in flight
their messages share gRPC messages. Nothing waits for a batch: a message goes out at the next
turn of the event loop.

A request's stream behaves as its Generate call did: its chunks in order, then the end; a
failure of the request (the replica's status, e.g. INVALID_ARGUMENT) ends it with CallFailed
and that status. A failure of the call itself (the replica gone: UNAVAILABLE) ends every
request on it with CallFailed and the call's status; the call is then dead and the caller
opens another (`alive`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any

import grpc

from shared.rpc.slomesh.v1 import replica_pb2


class StreamFailed(Exception):
    """A request's stream ended with a gRPC status (its own, or its call's)."""

    def __init__(self, status: str, detail: str = "") -> None:
        super().__init__(f"{status} {detail}".strip())
        self.status = status
        self.detail = detail


class StreamsCall:
    """One `Replica.Streams` call on `stub` (a ReplicaStub), carrying many requests' streams
    (module docstring). Opened at the first `stream`; `close` ends it."""

    def __init__(self, stub: Any, metadata: Sequence[tuple[str, str]]) -> None:
        self._stub = stub
        self._metadata = list(metadata)
        self._next_id = 0
        self._inboxes: dict[int, asyncio.Queue[replica_pb2.StreamEvent | StreamFailed]] = {}
        self._opens: list[replica_pb2.StreamOpen] = []
        self._cancels: list[int] = []
        self._ready: asyncio.Event | None = None
        self._closing = False
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self.failed: StreamFailed | None = None
        """Why the call ended (None while it serves)."""
        self.messages_up = self.messages_down = 0
        """gRPC messages sent and received on the call (each carries one or more items)."""

    @property
    def alive(self) -> bool:
        """Whether new streams may be opened on this call."""
        return self.failed is None and not self._closing

    async def stream(
        self, request: replica_pb2.ReplicaGenerateRequest, trace_headers: Mapping[str, str]
    ) -> AsyncGenerator[replica_pb2.ReplicaChunk, None]:
        """One request's chunks, as `Replica.Generate(request)` streams them; raises
        StreamFailed with the status the call would have ended with. Closing the generator
        before its end cancels the request on the replica."""
        if not self.alive:
            raise self.failed or StreamFailed("UNAVAILABLE", "the replica's stream is closed")
        self._start()
        self._next_id += 1
        stream_id = self._next_id
        inbox: asyncio.Queue[replica_pb2.StreamEvent | StreamFailed] = asyncio.Queue()
        self._inboxes[stream_id] = inbox
        self._send(
            open_=replica_pb2.StreamOpen(
                stream_id=stream_id, request=request, trace_headers=dict(trace_headers)
            )
        )
        ended = False
        try:
            while True:
                event = await inbox.get()
                if isinstance(event, StreamFailed):
                    ended = True
                    raise event
                if event.HasField("chunk"):
                    yield event.chunk
                if event.end:
                    ended = True
                    if event.status:
                        raise StreamFailed(event.status, event.detail)
                    return
        finally:
            self._inboxes.pop(stream_id, None)
            if not ended and self.alive:
                self._send(cancel=stream_id)

    def close(self) -> None:
        """End the call (its open streams fail CANCELLED)."""
        self._closing = True
        if self._call is not None:
            self._call.cancel()
        self._fail(StreamFailed("CANCELLED", "the caller closed the replica's stream"))

    def _start(self) -> None:
        if self._call is not None:
            return
        self._ready = asyncio.Event()
        self._call = self._stub.Streams(self._outgoing(), metadata=self._metadata)
        self._reader = asyncio.get_running_loop().create_task(self._read())

    def _send(self, open_: replica_pb2.StreamOpen | None = None, cancel: int | None = None) -> None:
        if open_ is not None:
            self._opens.append(open_)
        if cancel is not None:
            self._cancels.append(cancel)
        assert self._ready is not None
        self._ready.set()

    async def _outgoing(self) -> AsyncIterator[replica_pb2.StreamsUp]:
        """Everything queued since the last message, as one message, each time some is."""
        assert self._ready is not None
        while self.alive:
            await self._ready.wait()
            self._ready.clear()
            if not self.alive:
                return
            if not self._opens and not self._cancels:
                continue
            up = replica_pb2.StreamsUp(open=self._opens, cancel=self._cancels)
            self._opens, self._cancels = [], []
            self.messages_up += 1
            yield up

    async def _read(self) -> None:
        failure = StreamFailed("UNAVAILABLE", "the replica ended its stream")
        try:
            async for down in self._call:
                self.messages_down += 1
                for event in down.events:
                    inbox = self._inboxes.get(event.stream_id)
                    if inbox is not None:  # else: closed by its caller meanwhile
                        inbox.put_nowait(event)
        except grpc.aio.AioRpcError as err:
            failure = StreamFailed(err.code().name, err.details() or "")
        except asyncio.CancelledError:
            failure = StreamFailed("CANCELLED", "the caller closed the replica's stream")
        except Exception as err:  # a broken message: every stream on the call fails
            failure = StreamFailed("INTERNAL", type(err).__name__)
        self._fail(failure)

    def _fail(self, failure: StreamFailed) -> None:
        if self.failed is None:
            self.failed = failure
        for inbox in self._inboxes.values():
            inbox.put_nowait(failure)
        self._inboxes.clear()
        if self._ready is not None:
            self._ready.set()  # the sender sees the end

    async def wait_closed(self) -> None:
        """After `close`: wait until the call's reader has finished."""
        if self._reader is not None and not self._reader.done():
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
