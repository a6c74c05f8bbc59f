"""The replica's side of `Replica.Streams`: many Generate calls on one long-lived stream per
caller (the caller's side and why: shared/rpc/replica_streams.py).

Each `StreamOpen` runs the deployment's own `Generate` as a task of its own, exactly as a
Generate call would (the same limits, refusals and trace context: `RequestContext` stands in
for the call's gRPC context, with the Streams call's metadata and the request's trace
headers); its chunks, end or failure go into one outbox, and the sender writes whatever the
outbox holds as one `StreamsDown` each time it runs. A `cancel` cancels that request's task
(its Generate is closed: the engine aborts the request); the end of the Streams call cancels
every request still on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from shared.rpc.call_errors import status_of
from shared.rpc.slomesh.v1 import replica_pb2


class RequestContext:
    """What a Generate call's gRPC context gives the deployment: the call's metadata (the mesh
    credential of the Streams call, the request's trace headers) and the status it set."""

    def __init__(self, metadata: Sequence[tuple[str, str]], trace: Mapping[str, str]) -> None:
        self._metadata = (*metadata, *trace.items())
        self.code: Any = None
        self.details = ""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def set_code(self, code: Any) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


class Outbox:
    """Events of every request on the call, taken all at once by the sender."""

    def __init__(self) -> None:
        self._events: list[replica_pb2.StreamEvent] = []
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, event: replica_pb2.StreamEvent) -> None:
        self._events.append(event)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def take(self) -> list[replica_pb2.StreamEvent]:
        """Every event put since the last take (waits for one; [] once closed and empty)."""
        while not self._events and not self.closed:
            self._ready.clear()
            await self._ready.wait()
        events, self._events = self._events, []
        return events


def _failure(err: BaseException, context: RequestContext) -> tuple[str, str]:
    """The status name and details a Generate call would have ended with."""
    if context.code is not None:
        return str(context.code.name), context.details or str(err)
    return status_of(err), str(err) or type(err).__name__


async def serve_streams(
    generate: Any,
    incoming: AsyncIterator[replica_pb2.StreamsUp],
    metadata: Sequence[tuple[str, str]],
) -> AsyncIterator[replica_pb2.StreamsDown]:
    """The Streams call's messages to the caller. `generate(request, grpc_context=...)` is the
    deployment's Generate; `metadata` the Streams call's (credential already checked)."""
    outbox = Outbox()
    running: dict[int, asyncio.Task[None]] = {}

    async def run(op: replica_pb2.StreamOpen) -> None:
        sid = op.stream_id
        context = RequestContext(metadata, op.trace_headers)
        try:
            async for chunk in generate(op.request, grpc_context=context):
                outbox.put(replica_pb2.StreamEvent(stream_id=sid, chunk=chunk))
            outbox.put(replica_pb2.StreamEvent(stream_id=sid, end=True))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller closed it (or the call ended): nobody reads its end
            # a cancel from inside Generate (not of this task): the stream ends, failed
            outbox.put(replica_pb2.StreamEvent(stream_id=sid, end=True, status="CANCELLED"))
        except Exception as err:
            status, detail = _failure(err, context)
            failed = replica_pb2.StreamEvent(stream_id=sid, end=True, status=status, detail=detail)
            outbox.put(failed)
        finally:
            running.pop(sid, None)

    async def read() -> None:
        loop = asyncio.get_running_loop()
        try:
            async for up in incoming:
                for op in up.open:
                    running[op.stream_id] = loop.create_task(run(op))
                for sid in up.cancel:
                    task = running.get(sid)
                    if task is not None:
                        task.cancel()
        finally:
            outbox.close()  # the caller's side ended: so does the call

    reader = asyncio.get_running_loop().create_task(read())
    try:
        while events := await outbox.take():
            yield replica_pb2.StreamsDown(events=events)
    finally:
        reader.cancel()
        tasks = list(running.values())
        for task in tasks:
            task.cancel()
        for task in [reader, *tasks]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
