"""Which scheduler shard admits a request, found by the ingress itself (no central hop).

The mesh may run several scheduler applications (shards, services/scheduler/shard_peers.py),
each owning a share of the replicas. This ingress replica keeps a table of them: every
`refresh_interval_ms` it asks each known shard's `Health` (in parallel, off the request path)
for its ready replicas per model and the shards it sees alive, so a shard added while the mesh
serves is learned from any peer. A request's shards by preference are the weighted rendezvous
order of its id over the shards with ready replicas of its model (shared/policy/shards.py):
load spreads by replica count, and a shard added or removed moves only its share of requests.

A shard that fails a call UNAVAILABLE (it died or is restarting) is down at once: the request
is admitted again on the next shard in its order, within its admission deadline, and no
request goes there until a `Health` answer says it is back. The shard that admitted a request
gets its `Report` (it holds the request's books).

With one shard and `discover` off (the default mesh) there is no table and no polling: every
call goes to `shards[0]`, as with a single scheduler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.ingress.fast_path import FastPath
from services.ingress.shard_outbox import OutboxConfig
from shared.policy.shards import shard_order
from shared.rpc.bounded import bounded
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2


class ShardRoutingConfig(BaseModel):
    """The scheduler shards this ingress admits through."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    shards: list[str] = Field(default_factory=lambda: ["scheduler"], min_length=1)
    """Scheduler application names known at start; more are learned from their `Health`."""
    discover: bool = False
    """Poll the shards' `Health` even with one shard known, so shards added later are found
    (on by itself with more than one)."""
    refresh_interval_ms: float = Field(500.0, gt=0)
    """How often each shard's `Health` is asked (ready replicas, live shards), milliseconds."""
    refresh_timeout_ms: float = Field(1000.0, gt=0)
    """A `Health` answer slower than this leaves the shard as it was, milliseconds."""
    outbox: OutboxConfig = Field(default_factory=OutboxConfig)
    """How placements on credits and completion reports are batched into each shard's `Sync`
    calls (shard_outbox.py)."""


@dataclass
class _Shard:
    ready: dict[str, int] = field(default_factory=dict)
    """Model -> the shard's ready replicas of it (unknown until its first answer)."""
    down: bool = False
    answered: bool = False
    went_down: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while the shard is down (admissions pending there fail over)."""


class ShardRouter:
    def __init__(self, config: ShardRoutingConfig, client: Callable[[], MeshClient]) -> None:
        self.cfg = config
        self._client = client
        """The owner's mesh client, looked up at each call (tests swap it)."""
        self.table: dict[str, _Shard] = {s: _Shard() for s in config.shards}
        self._task: asyncio.Task[None] | None = None
        self.failovers = 0
        """Admissions sent to another shard because theirs did not answer."""

    @property
    def polling(self) -> bool:
        return self.cfg.discover or len(self.table) > 1

    def order(self, model: str, key: str) -> list[str]:
        """Shards to admit `key` through, by preference (the module docstring); shards that are
        down come last, as a final try."""
        self.start()
        if len(self.table) == 1:
            return list(self.table)
        up = {s: i for s, i in self.table.items() if not i.down}
        weights = {s: float(i.ready.get(model, 0)) if i.answered else 1.0 for s, i in up.items()}
        down = sorted(s for s, i in self.table.items() if i.down)
        return [*shard_order(key, weights), *down]

    def is_down(self, shard: str) -> bool:
        info = self.table.get(shard)
        return info is not None and info.down

    def failed(self, shard: str) -> None:
        """`shard` did not answer a call (UNAVAILABLE): down until its `Health` answers."""
        info = self.table.get(shard)
        if info is not None:
            info.down = True
            info.went_down.set()

    async def unless_down(self, shard: str, call: Awaitable[Any]) -> Any:
        """`call`'s result, or CallFailed(UNAVAILABLE) as soon as `shard` is found down while it
        runs (a shard whose process died may leave calls pending in Serve's queue for it until
        Serve replaces it): the call is cancelled, so a live shard drops it from its queue."""
        info = self.table.get(shard)
        if info is None or info.down:
            return await call
        task = asyncio.ensure_future(call)
        watch = asyncio.ensure_future(info.went_down.wait())
        try:
            await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            watch.cancel()
        if task.done():
            return task.result()
        task.cancel()
        raise CallFailed(shard, "UNAVAILABLE", "shard down while admitting")

    def start(self) -> None:
        """Poll the shards in the background (on the running loop; idempotent)."""
        if not self.polling or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self.cfg.refresh_interval_ms / 1e3)

    async def refresh(self) -> list[scheduler_pb2.HealthReply]:
        """Ask every known shard's `Health` once; update the table; the answers."""
        names = list(self.table)
        replies = await asyncio.gather(*(self._health(s) for s in names))
        got = []
        for name, reply in zip(names, replies, strict=True):
            info = self.table.get(name)
            if info is None:
                continue
            if reply is None:
                self.failed(name)
                continue
            got.append(reply)
            self.learn(name, reply)
        return got

    def learn(self, name: str, reply: scheduler_pb2.HealthReply) -> None:
        """Take `name`'s `Health` answer into the table (and the shards it knows)."""
        info = self.table.setdefault(name, _Shard())
        info.down = False
        info.went_down.clear()
        info.answered = True
        info.ready = {r.model: int(r.ready) for r in reply.replicas}
        if not reply.replicas and not reply.shard:  # a scheduler that knows no shards
            info.ready = {m: 1 for m in reply.ready_models}
        for peer in reply.shards:
            self.table.setdefault(peer, _Shard())

    async def _health(self, shard: str) -> scheduler_pb2.HealthReply | None:
        timeout = self.cfg.refresh_timeout_ms / 1e3
        try:
            call = self._client().call(
                shard, "scheduler", "Health", scheduler_pb2.HealthQuery(), timeout
            )
            reply: scheduler_pb2.HealthReply = await bounded(call, timeout + 0.1)
            return reply
        except (CallFailed, TimeoutError):
            return None


class ShardedFastPath:
    """The fast path (fast_path.py) with one credit book per shard: a shard grants credits on
    the replicas it owns and hears of the placements made on them."""

    def __init__(self, client: Callable[[], MeshClient], router: ShardRouter) -> None:
        self._client = client
        self.router = router
        self.paths: dict[str, FastPath] = {}

    def path(self, shard: str) -> FastPath:
        if shard not in self.paths:
            outbox = self.router.cfg.outbox
            self.paths[shard] = FastPath(self._client, application=shard, outbox=outbox)
        return self.paths[shard]

    @property
    def placed(self) -> int:
        """Requests placed on credits (fast path) since start."""
        return sum(p.placed for p in self.paths.values())

    def take(self, model: str, key: str) -> tuple[common_pb2.ReplicaRef, str] | None:
        """A replica for `model` on a credit of the first shard in `key`'s order that has one,
        and that shard; None: the full path."""
        for shard in self.router.order(model, key):
            if self.router.is_down(shard):
                continue
            ref = self.path(shard).take(model)
            if ref is not None:
                return ref, shard
        return None

    def notify(
        self,
        meta: common_pb2.RequestMeta,
        prediction: Awaitable[object],
        replica: common_pb2.ReplicaRef,
        shard: str,
    ) -> None:
        self.path(shard).notify(meta, prediction, replica)

    def report(self, shard: str, report: scheduler_pb2.CompletionReport) -> None:
        """Queue a completion report for the shard that admitted the request (after its
        placement, if it was placed on a credit)."""
        self.path(shard).report(report)

    def admitted(self, model: str, shard: str) -> None:
        self.path(shard).admitted(model)

    def first_token(self, request_id: str) -> None:
        for p in self.paths.values():
            p.first_token(request_id)

    async def settled(self, request_id: str) -> None:
        for p in list(self.paths.values()):
            await p.settled(request_id)

    def replica_failed(self, application: str) -> None:
        for p in self.paths.values():
            p.replica_failed(application)
