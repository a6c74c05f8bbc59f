"""The ingress's fast path: admission on lease credits, with no scheduler round trip
and no prediction before the replica's stream opens.

While this ingress replica holds a credit for a replica serving the request's model
(core/credits.py; the scheduler grants them only while the cluster has headroom,
services/scheduler/core/leases.py), the request goes straight to that replica. Off the critical
path, the placement goes to the scheduler in the shard's next `Sync` call (shard_outbox.py:
batched with other placements and completion reports), which records it in its books and the
policy's and answers with a new grant, and once the first token is out another task asks the
predictor (its span joins the request's trace; the request already runs, so the scheduler
keeps its prior length estimate for it: QLM's estimator learns output lengths from reports
either way). Without a credit the request takes the full path (Predict, then Admit: QLM
queueing). The request's completion report goes through the same outbox, after its placement,
so the scheduler never hears of a finish before the placement. A grant is asked for (an empty
`Sync`, or the next batch sent at once) when one is due or this ingress spent its credits
(for the model, or on one replica). A credit placement's seat comes back to this ingress when
the request finishes (core/credits.py, `refill`), so a steady stream of requests asks for a
grant when one is due, not each time it has placed as many as it was granted.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from services.ingress.core.credits import Credit, CreditLedger
from services.ingress.shard_outbox import OutboxConfig, ShardOutbox
from shared.rpc.client import MeshClient
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2
from shared.telemetry import trace_headers


class FastPath:
    def __init__(
        self,
        client: Callable[[], MeshClient],
        enabled: bool = True,
        application: str = "scheduler",
        outbox: OutboxConfig | None = None,
    ) -> None:
        self._client = client
        self.application = application
        """The scheduler (shard) that grants these credits and hears of their placements."""
        """The owner's mesh client, looked up at each call (tests swap it)."""
        self.enabled = enabled
        self.ledger = CreditLedger()
        self.ingress_id = uuid.uuid4().hex[:16]
        """This ingress replica's id in the scheduler's lease book (one per process)."""
        self._retry_at = 0.0
        self._epochs: dict[str, tuple[str, str]] = {}
        """Request id -> the grant epoch its placement was made in and the replica (until its
        report)."""
        self.outbox = ShardOutbox(
            self._sync,
            self.ingress_id,
            self._apply,
            self._not_placed,
            outbox,
            lambda: self.ledger.holds_credit(time.monotonic()),
        )
        """Placements and completion reports for this shard, batched (shard_outbox.py)."""
        self._side: set[asyncio.Task[None]] = set()
        self._predictions: dict[str, tuple[Awaitable[Any], contextvars.Context]] = {}
        """Predictions of fast-path requests, run once their first token is out."""
        self.placed = 0
        """Requests placed on credits (fast path) since start."""

    def take(self, model: str) -> common_pb2.ReplicaRef | None:
        """A replica for `model` on a credit, or None (no credit: the full path)."""
        if not self.enabled:
            return None
        now = time.monotonic()
        if self.ledger.due_before_take(model, now):
            self.refresh()
        credit = self.ledger.take(model, now)
        if credit is None:
            return None
        self.placed += 1
        return common_pb2.ReplicaRef(
            application=credit.application, gpu=credit.gpu, model=credit.model
        )

    def replica_failed(self, application: str) -> None:
        """A replica refused or lost a stream before it started: spend no more credits on it."""
        self.ledger.drop(application)

    def notify(
        self,
        meta: common_pb2.RequestMeta,
        prediction: Awaitable[object],
        replica: common_pb2.ReplicaRef,
    ) -> None:
        """Queue the placement for the scheduler (shard_outbox.py: sent within its interval,
        at once when this ingress's credits for the model, or on that replica, are spent);
        the prediction waits for the first token (`first_token`; its `predict` span joins the
        trace; the request already runs, so the scheduler keeps its prior length estimate for
        it). The current trace context goes with both."""
        self._predictions[meta.request_id] = (prediction, contextvars.copy_context())
        self._epochs[meta.request_id] = (self.ledger.epoch, replica.application)
        notice = scheduler_pb2.PlaceNotice(
            ingress_id=self.ingress_id,
            admit=scheduler_pb2.AdmitRequest(meta=meta),
            replica=replica,
        )
        self.outbox.place(notice, trace_headers())
        if self.ledger.due_after_take(meta.model, replica.application, time.monotonic()):
            self.refresh()

    def report(self, report: scheduler_pb2.CompletionReport) -> None:
        """Queue a completion report (after the request's placement, if it had one); a
        request placed on a credit gives its seat to this ingress's next request
        (core/credits.py, `refill`)."""
        placed = self._epochs.pop(report.meta.request_id, None)
        if placed is not None and placed[1] == report.replica.application:  # not re-admitted
            self.ledger.refill(placed[1], placed[0], time.monotonic())
        self.outbox.report(report)

    def first_token(self, request_id: str) -> None:
        """The request's first token went out (or its stream ended): run its prediction now,
        off the first token's way (on 2 cores it would compete with it), in the trace context
        the request had when it was placed."""
        held = self._predictions.pop(request_id, None)
        if held is None:
            return
        prediction, ctx = held
        task = asyncio.get_running_loop().create_task(_ignore(prediction), context=ctx)
        self._side.add(task)
        task.add_done_callback(self._side.discard)

    async def settled(self, request_id: str) -> None:
        """Wait until the scheduler was told of everything queued so far (this request's
        placement among it, if it had one)."""
        await self.outbox.drained()

    def admitted(self, model: str) -> None:
        """The full path admitted a request: headroom may be back, ask for a grant if due (the
        first grant is asked for here: never while the scheduler only rejects)."""
        if self.ledger.refresh_due(model, time.monotonic()):
            self.refresh()

    def refresh(self) -> None:
        """Ask for a new grant now: the outbox sends at once what waits (or an empty `Sync`),
        one call at a time; after a failed call, not again within a second."""
        if not self.enabled or time.monotonic() < self._retry_at:
            return
        self.outbox.flush()

    async def _sync(self, batch: scheduler_pb2.SyncBatch) -> scheduler_pb2.LeaseGrant:
        grant: scheduler_pb2.LeaseGrant = await self._client().call(
            self.application, "scheduler", "Sync", batch
        )
        return grant

    def _not_placed(self, notices: list[scheduler_pb2.PlaceNotice]) -> None:
        """Placements the scheduler was never told of (their call failed): their credits are
        free again; no grant for a second."""
        self._retry_at = time.monotonic() + 1.0
        for notice in notices:
            epoch, _ = self._epochs.pop(notice.admit.meta.request_id, (self.ledger.epoch, ""))
            self.ledger.give_back(notice.replica.application, epoch)

    def _apply(self, grant: scheduler_pb2.LeaseGrant) -> None:
        credits = [
            Credit(c.replica.application, c.replica.model, c.replica.gpu, int(c.limit))
            for c in grant.credits
        ]
        self.ledger.update(grant.epoch, credits, grant.ttl_s, time.monotonic())


async def _ignore(awaitable: Awaitable[object]) -> None:
    await awaitable
