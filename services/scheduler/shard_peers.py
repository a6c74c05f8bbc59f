"""A scheduler shard among its peers: who is alive, which replicas are its own, and the tenant
usage they exchange.

Several scheduler applications (shards) serve one mesh active-active. Each is configured with
every replica and the names of the other shards it knows at start (`ShardConfig.peers`). Every
`exchange_interval_ms` it calls `Exchange` on each peer, sending its tenant usage and the
shards it sees alive and receiving the same back; a shard that calls it is a peer from then on
(so a shard added while the mesh serves is known to all after one exchange). A peer whose call
fails is down at once (no replica of its goes unserved while it restarts); one failing for
`forget_peer_after_s` is forgotten (a removed shard).

Ownership: the live shards divide the replicas by `shared/policy/shards.py` (`divide_replicas`);
each shard places and pulls only on its own, the others it treats as unavailable. When a peer
dies its replicas are taken over by the survivors at their next exchange; when it comes back
they are handed back. Usage: shard_usage.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from services.scheduler.shard_usage import UsageLedger
from shared.policy.shards import divide_replicas
from shared.rpc.bounded import bounded
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.slomesh.v1 import scheduler_pb2

log = logging.getLogger(__name__)


class ShardConfig(BaseModel):
    """This scheduler as one shard of several (`shard` in the scheduler's args)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = "scheduler"
    """This shard's Serve application name (what peers and ingresses call)."""
    peers: list[str] = Field(default_factory=list)
    """The other shards' application names known at start; more are learned from exchanges.
    Empty: a single scheduler (no exchange, every replica its own)."""
    exchange_interval_ms: float = Field(200.0, gt=0)
    """How often this shard exchanges usage and liveness with each peer, milliseconds."""
    exchange_timeout_ms: float = Field(500.0, gt=0)
    """An exchange slower than this fails, and the peer is down until one succeeds,
    milliseconds."""
    forget_peer_after_s: float = Field(60.0, gt=0)
    """A peer that has not answered for this long is forgotten (a shard removed), seconds."""


Replicas = list[tuple[str, str]]


class ShardPeers:
    def __init__(
        self,
        config: ShardConfig,
        replicas: Replicas,
        client: MeshClient,
        vtc: Callable[[], VirtualTokenCounter | None],
        on_owned: Callable[[set[str], set[str]], None],
    ) -> None:
        self.cfg = config
        self.replicas = replicas
        self.client = client
        self._vtc = vtc
        self._on_owned = on_owned
        """Called with (replicas gained, replicas lost) when ownership changes."""
        self.epoch = uuid.uuid4().hex[:12]
        self.ledger = UsageLedger()
        self.peers: dict[str, float] = dict.fromkeys(config.peers, time.time())
        """Peer -> when it last answered (or called), Unix seconds."""
        self.down: set[str] = set()
        self.staleness_s = 0.0
        """The oldest live peer's usage report age just after the last exchange (the report
        latency), seconds."""
        self.max_staleness_s = 0.0
        """The oldest live peer's usage report age just before any exchange since start (one
        interval plus the report latency and event-loop delays: the staleness bound met),
        seconds."""
        self.exchanges = 0
        self._task: asyncio.Task[None] | None = None
        self.owned = divide_replicas(replicas, self.live()).get(config.name, set())

    @property
    def sharded(self) -> bool:
        return bool(self.peers)

    def live(self) -> list[str]:
        """The shards this one sees alive, itself included, by name."""
        return sorted({self.cfg.name, *(p for p in self.peers if p not in self.down)})

    def ready_counts(self, healthy: Callable[[str], bool]) -> dict[str, int]:
        """Model -> replicas of it this shard owns that are `healthy`."""
        out: dict[str, int] = {}
        for app, model in self.replicas:
            if app in self.owned and healthy(app):
                out[model] = out.get(model, 0) + 1
        return out

    # ---- the exchange ---------------------------------------------------------------------
    def snapshot(self) -> scheduler_pb2.ShardUsage:
        vtc = self._vtc()
        charged = vtc.charged if vtc is not None else {}
        return scheduler_pb2.ShardUsage(
            shard=self.cfg.name,
            epoch=self.epoch,
            sent_unix_s=time.time(),
            tenants=[scheduler_pb2.TenantUsage(tenant=t, charged=c) for t, c in charged.items()],
            shards=self.live(),
        )

    def receive(self, usage: scheduler_pb2.ShardUsage) -> None:
        """A peer's report (its call, or its answer to ours): it is alive; absorb its usage;
        learn the shards it knows."""
        if usage.shard == self.cfg.name or not usage.shard:
            return
        self._alive(usage.shard)
        for name in usage.shards:
            if name != self.cfg.name and name not in self.peers:
                self.peers[name] = time.time()  # alive to a peer: ours once it answers us
                self.down.add(name)
        deltas = self.ledger.merge(
            usage.shard,
            usage.epoch,
            usage.sent_unix_s,
            {t.tenant: t.charged for t in usage.tenants},
        )
        vtc = self._vtc()
        if vtc is not None:
            for tenant, delta in deltas.items():
                vtc.absorb(tenant, delta)

    def start(self) -> None:
        """Run the exchange loop (on the running event loop; idempotent). Called at start and
        again whenever a peer is learned: a scheduler started alone (no peers, no loop) that a
        shard added later calls must exchange with it from then on, or it would never find it
        gone when that shard is removed."""
        if not self.sharded or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await self.exchange_once()
            except Exception:  # one failed round must not end the exchanges for good
                log.exception("shard exchange round failed")
            await asyncio.sleep(self.cfg.exchange_interval_ms / 1e3)

    async def exchange_once(self) -> None:
        names = list(self.peers)
        before = time.time()  # the view at its oldest: just before it is refreshed
        self.max_staleness_s = max(
            self.max_staleness_s, self.ledger.staleness_s(before, set(self.live()))
        )
        mine = self.snapshot()
        answers = await asyncio.gather(*(self._call(p, mine) for p in names))
        now = time.time()
        for name, answer in zip(names, answers, strict=True):
            if answer is not None:
                self.receive(answer)
            elif name not in self.down:
                self.down.add(name)
                self._reassign()
            elif now - self.peers.get(name, now) > self.cfg.forget_peer_after_s:
                self.peers.pop(name, None)
                self.down.discard(name)
                self.ledger.forget(name)
        self.exchanges += 1
        self.staleness_s = self.ledger.staleness_s(now, set(self.live()))

    async def _call(
        self, peer: str, mine: scheduler_pb2.ShardUsage
    ) -> scheduler_pb2.ShardUsage | None:
        timeout = self.cfg.exchange_timeout_ms / 1e3
        try:
            call = self.client.call(peer, "scheduler", "Exchange", mine, timeout)
            answer: scheduler_pb2.ShardUsage = await bounded(call, timeout + 0.1)
            return answer
        except (CallFailed, TimeoutError):
            return None
        except Exception as err:  # e.g. its application was deleted: down like a failed call
            log.info("shard exchange with %s failed: %r", peer, err)
            return None

    def _alive(self, peer: str) -> None:
        known = peer in self.peers
        self.peers[peer] = time.time()
        if peer in self.down or not known:
            self.down.discard(peer)
            self._reassign()
        if not known:
            self.start()

    def _reassign(self) -> None:
        owned = divide_replicas(self.replicas, self.live()).get(self.cfg.name, set())
        gained, lost = owned - self.owned, self.owned - owned
        self.owned = owned
        if gained or lost:
            self._on_owned(gained, lost)
