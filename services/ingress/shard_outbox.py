"""The ingress's calls to one scheduler shard off the request path, batched (`scheduler.Sync`).

Two kinds of scheduler call follow a request rather than precede it: the notice of a placement
made on a lease credit (fast_path.py; the stream is already open) and the completion report.
One Serve handle call each cost the scheduler about a millisecond of CPU, ten times the
bookkeeping they carry, and were most of its CPU per admission. Here they queue per shard, in
the order they happen, and one `Sync` call carries every waiting item; its answer is this
ingress's new lease grant (a `Sync` with no items is a grant request, as `Lease`).

When a batch is sent:
- at once when `max_items` wait, or when a grant is needed now (`flush`: this ingress spent
  its credits, or its grant is due for refresh; placing on a credit needs a fresh grant, so the
  fast path's rate is not held to one grant per interval);
- else `interval_ms` after the first waiting item (the staleness bound: the scheduler's books
  lag this ingress's placements and completions by at most that plus one call, and the seats
  not yet noticed stay reserved to this ingress by its grant, so the lag never hands a seat
  twice; a completion frees its seat at most that much later);
- `headroom_interval_ms` instead while this ingress holds unspent credits of a live grant
  (`relaxed`): the shard granted them with an empty queue, so no queued request waits on a
  completion to be pulled, and the credits reserve the seats of the placements not yet told.
  A queue that forms meanwhile sees this ingress's completions at most that much later, until
  its next grant (empty while the queue holds anything) ends the credits. At a few dozen
  requests a second per ingress this is most of the calls: each costs the shard and the
  ingress Serve's per-call CPU, whatever it carries.
One call is in flight at a time per shard, so the scheduler runs a request's placement before
its report; items that come meanwhile go in the next call. A failed call's placements are
handed to `on_failed` (their credits are given back); its reports are lost, as a failed
`Report` was (the scheduler also releases what replicas no longer hold). The queue is bounded
(`max_queued_items`): an item beyond it is dropped and counted (`dropped`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from shared.rpc.slomesh.v1 import scheduler_pb2


class OutboxConfig(BaseModel):
    """How the ingress batches its placement notices and completion reports per shard."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    interval_ms: float = Field(default=20.0, ge=0.0)
    """How long the first waiting item waits for others before the batch is sent, milliseconds
    (0: at the next turn of the event loop)."""
    headroom_interval_ms: float = Field(default=100.0, ge=0.0)
    """The same wait while this ingress holds unspent lease credits (the shard had no queue
    when it granted them), milliseconds; a grant needed or a full batch still goes at once."""
    max_items: int = Field(default=128, ge=1)
    """Items one `Sync` call carries at most; a full batch is sent at once."""
    max_queued_items: int = Field(default=8192, ge=1)
    """Items waiting at most (not counting the batch in flight); one beyond it is dropped."""


class ShardOutbox:
    """Placements and reports for one shard, sent as `scheduler.Sync` calls (module
    docstring)."""

    def __init__(
        self,
        send: Callable[[scheduler_pb2.SyncBatch], Awaitable[scheduler_pb2.LeaseGrant]],
        ingress_id: str,
        on_grant: Callable[[scheduler_pb2.LeaseGrant], None],
        on_failed: Callable[[list[scheduler_pb2.PlaceNotice]], None],
        config: OutboxConfig | None = None,
        relaxed: Callable[[], bool] = lambda: False,
    ) -> None:
        self._send = send
        self._relaxed = relaxed
        """Whether this ingress holds unspent credits now (`headroom_interval_ms` applies)."""
        self.ingress_id = ingress_id
        self._on_grant = on_grant
        self._on_failed = on_failed
        self.config = config or OutboxConfig()
        self._items: list[scheduler_pb2.SyncItem] = []
        self._urgent = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._queued = 0
        """Items queued since start (a sequence number: `drained` waits for one of them)."""
        self._sent = 0
        """Items whose call has ended (sent or failed), in queue order."""
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.calls = 0
        """`Sync` calls made."""
        self.dropped = 0
        """Items dropped: the queue was full."""

    def place(self, notice: scheduler_pb2.PlaceNotice, trace: Mapping[str, str]) -> None:
        """Queue a placement made on a credit (its request's trace headers: the scheduler's
        `grouping` span joins the trace)."""
        item = scheduler_pb2.SyncItem(place=notice, trace_headers=dict(trace))
        if not self._queue(item):
            self._on_failed([notice])

    def report(self, report: scheduler_pb2.CompletionReport) -> None:
        """Queue a completion report."""
        self._queue(scheduler_pb2.SyncItem(report=report))

    def flush(self) -> None:
        """Send what waits now (with nothing waiting: ask for a grant), without waiting for
        the interval; after the call in flight, if one is."""
        self._urgent = True
        self._wake.set()
        self._run_soon()

    async def drained(self) -> None:
        """Wait until every item queued so far has been sent (or its call failed), sending at
        once what waits."""
        if self._sent >= self._queued:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((self._queued, fut))
        self.flush()
        await asyncio.shield(fut)

    def _queue(self, item: scheduler_pb2.SyncItem) -> bool:
        if len(self._items) >= self.config.max_queued_items:
            self.dropped += 1
            return False
        self._items.append(item)
        self._queued += 1
        if len(self._items) >= self.config.max_items:
            self._wake.set()
        self._run_soon()
        return True

    def _run_soon(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task.get_loop() is not loop:
            self._task = None  # its loop is gone (an Event binds to the loop that waits on it)
            was_set, self._wake = self._wake.is_set(), asyncio.Event()
            if was_set:
                self._wake.set()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        while self._items or self._urgent:
            full = len(self._items) >= self.config.max_items
            if not (self._urgent or full):
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.wait_s()):
                        await self._wake.wait()
            self._urgent = False
            self._wake.clear()
            batch = self._items[: self.config.max_items]
            del self._items[: len(batch)]
            await self._call(batch)
            self._sent += len(batch)
            self._release()

    def wait_s(self) -> float:
        """How long the first waiting item waits for others now, seconds (module docstring)."""
        relaxed = self._relaxed()
        return (self.config.headroom_interval_ms if relaxed else self.config.interval_ms) / 1e3

    async def _call(self, batch: list[scheduler_pb2.SyncItem]) -> None:
        self.calls += 1
        message = scheduler_pb2.SyncBatch(ingress_id=self.ingress_id, items=batch)
        try:
            grant = await self._send(message)
        except Exception:  # CallFailed, or a deleted shard's handle raising
            self._on_failed([i.place for i in batch if i.WhichOneof("work") == "place"])
            return
        self._on_grant(grant)

    def _release(self) -> None:
        keep = []
        for seq, fut in self._waiters:
            if seq <= self._sent:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((seq, fut))
        self._waiters = keep
