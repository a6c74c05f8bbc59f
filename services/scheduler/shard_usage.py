"""Tenant usage across scheduler shards: one fair share, however requests are split.

Each shard's virtual token counter (core/fairness/vtc.py) charges the requests it dispatches.
Shards tell each other, every exchange interval, the weighted tokens they charged each tenant
since they started (`VirtualTokenCounter.charged`: cumulative, so a lost or late message loses
nothing, the next one carries it). `UsageLedger.merge` turns a peer's cumulative figures into
what is new since its previous report; the shard adds that to its own counters (`absorb`), so
it picks the tenant served next by the tenant's service on every shard.

Staleness: what a shard knows of a peer is as old as the peer's last report (its send time on
the peer's clock; the shards share a host or NTP). `staleness_s` is the oldest among the live
peers at a given moment; the shell samples it at each exchange and exports it.

The first report of a peer (or of a new epoch: it restarted) is the baseline: service a peer
gave before this shard heard of it is not charged here (this shard lifts a tenant it did not
know to the smallest active counter anyway). After it, a tenant new at the peer counts from
zero, and a tenant the peer no longer lists (it forgot it) drops out, so the state here stays
bounded by the tenants the peers keep. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class _Peer:
    epoch: str
    sent_s: float
    charged: dict[str, float] = field(default_factory=dict)


class UsageLedger:
    def __init__(self) -> None:
        self._peers: dict[str, _Peer] = {}

    def merge(
        self, shard: str, epoch: str, sent_s: float, charged: Mapping[str, float]
    ) -> dict[str, float]:
        """A report from peer `shard`: tenant -> weighted tokens charged there since its
        previous report (to absorb). An older report than one already merged adds nothing."""
        peer = self._peers.get(shard)
        if peer is None or peer.epoch != epoch:
            self._peers[shard] = _Peer(epoch, sent_s, dict(charged))
            return {}
        if sent_s < peer.sent_s:
            return {}
        deltas: dict[str, float] = {}
        for tenant, total in charged.items():
            before = peer.charged.get(tenant, 0.0)
            if total != before:
                deltas[tenant] = total - before
        peer.charged = dict(charged)
        peer.sent_s = sent_s
        return deltas

    def forget(self, shard: str) -> None:
        """Peer `shard` is gone for good: its figures go (a return starts from a baseline)."""
        self._peers.pop(shard, None)

    def staleness_s(self, now_s: float, live: set[str]) -> float:
        """Age of the oldest report among the `live` peers (0 with none)."""
        ages = [now_s - p.sent_s for s, p in self._peers.items() if s in live]
        return max(ages, default=0.0)

    @property
    def tenants(self) -> int:
        """(peer, tenant) baselines kept."""
        return sum(len(p.charged) for p in self._peers.values())
