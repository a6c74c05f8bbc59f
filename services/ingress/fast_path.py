"""The ingress's fast path: admission on lease credits, with no scheduler round trip
and no prediction before the replica's stream opens.

While this ingress replica holds a credit for a replica serving the request's model
(core/credits.py; the scheduler grants them only while the cluster has headroom,
services/scheduler/core/leases.py), the request goes straight to that replica. Off the critical
path, a background task tells the scheduler (`Place`), which records the placement in its books
and the policy's and answers with a new grant, and once the first token is out another asks the
predictor (its span joins the request's trace; the request already runs, so the scheduler
keeps its prior length estimate for it: QLM's estimator learns output lengths from reports
either way). Without a credit the request takes the full path (Predict, then Admit: QLM
queueing). The request's completion report waits for its `Place` to be answered, so the
scheduler never hears of a finish before the placement.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from services.ingress.core.credits import Credit, CreditLedger
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2


class FastPath:
    def __init__(
        self,
        client: Callable[[], MeshClient],
        enabled: bool = True,
        application: str = "scheduler",
    ) -> None:
        self._client = client
        self.application = application
        """The scheduler (shard) that grants these credits and hears of their placements."""
        """The owner's mesh client, looked up at each call (tests swap it)."""
        self.enabled = enabled
        self.ledger = CreditLedger()
        self.ingress_id = uuid.uuid4().hex[:16]
        """This ingress replica's id in the scheduler's lease book (one per process)."""
        self._refresh: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._notices: dict[str, asyncio.Task[None]] = {}
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
        if self.ledger.epoch and self.ledger.refresh_due(model, now):
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
        """In the background: tell the scheduler of the placement at once (its books must not
        lag: a burst's full-path admissions read them); the prediction waits for the first token
        (`first_token`; its `predict` span joins the trace; the request already runs, so the
        scheduler keeps its prior length estimate for it). The current trace context goes with
        both calls."""
        epoch = self.ledger.epoch
        loop = asyncio.get_running_loop()
        self._predictions[meta.request_id] = (prediction, contextvars.copy_context())

        async def send() -> None:
            notice = scheduler_pb2.PlaceNotice(
                ingress_id=self.ingress_id,
                admit=scheduler_pb2.AdmitRequest(meta=meta),
                replica=replica,
            )
            try:
                grant = await self._client().call(self.application, "scheduler", "Place", notice)
            except CallFailed:
                self.ledger.give_back(replica.application, epoch)
                return
            self._apply(grant)

        task = loop.create_task(send())
        self._notices[meta.request_id] = task
        task.add_done_callback(lambda _: self._notices.pop(meta.request_id, None))

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
        """Wait until the scheduler was told of this request's placement (if it had one)."""
        task = self._notices.get(request_id)
        if task is not None:
            await asyncio.shield(task)

    def admitted(self, model: str) -> None:
        """The full path admitted a request: headroom may be back, ask for a grant if due (the
        first grant is asked for here: never while the scheduler only rejects)."""
        if self.ledger.refresh_due(model, time.monotonic()):
            self.refresh()

    def refresh(self) -> None:
        """Ask for a new grant in the background (one request at a time; after a failed ask,
        not again within a second)."""
        busy = self._refresh is not None and not self._refresh.done()
        if not self.enabled or busy or time.monotonic() < self._retry_at:
            return

        async def ask() -> None:
            try:
                grant = await self._client().call(
                    self.application,
                    "scheduler",
                    "Lease",
                    scheduler_pb2.LeaseRequest(ingress_id=self.ingress_id),
                )
            except CallFailed:
                self._retry_at = time.monotonic() + 1.0
                return  # no grant: the full path until the next try
            self._apply(grant)

        self._refresh = asyncio.get_running_loop().create_task(ask())

    def _apply(self, grant: scheduler_pb2.LeaseGrant) -> None:
        credits = [
            Credit(c.replica.application, c.replica.model, c.replica.gpu, int(c.limit))
            for c in grant.credits
        ]
        self.ledger.update(grant.epoch, credits, grant.ttl_s, time.monotonic())


async def _ignore(awaitable: Awaitable[object]) -> None:
    await awaitable
