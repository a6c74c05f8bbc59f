"""Admission leases: the fast path that needs no scheduler round trip.

While the cluster has headroom the scheduler grants each ingress replica credits per replica:
the ingress then places a request itself, at once, and tells the scheduler afterwards (`Place`),
which records the placement in its books and the policy's (AdmissionCore.place_leased). Queued
admission keeps the full path (`Admit`), where a few milliseconds do not matter.

Credits are a cumulative window per (ingress, replica), like HTTP/2 flow control: a grant says
"you may have placed `limit` requests on this replica in all, in this scheduler epoch"; the
ingress places while its own count is below it. The scheduler counts the placements it has been
told of (`noticed`); `limit - noticed` are seats reserved for that ingress and not yet seen
used. Being cumulative, a grant that crosses notices still in flight never hands a seat twice.
An ingress also refills a credit when a request it placed on one finishes (its seat stays in
these books until the report comes, then the placement that reused it is noticed), so
`noticed` may pass `limit` until its next grant; nothing is reserved then.

Headroom rule (`free_seats`): a replica offers fast-path seats only while nothing waits in the
global queue (QLM's queueing and ordering then apply to every arrival again), it is healthy, it
serves one model (a replica that may swap offers none: a credit names the model the replica
starts on, and which model it serves next is the policy's swap plan; a request placed there on
a credit would wait behind a swap the policy never planned, and order one by itself), and it
holds fewer requests than its engine's seats (`max_num_seqs` x engines, and the admission
limit); offered are the free seats minus what other ingresses hold reserved, at most an equal
share of the free seats among the ingresses holding live grants and at most `max_credits`. A
grant lives `ttl_ms`. Full-path admissions do not count reserved seats (an ingress without
credit is never starved by another's reservation), so the admission limit may be passed by at
most the seats reserved when headroom ran out, for at most `ttl_ms`; once the global queue
holds anything, every new grant is empty.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.live_view import LiveReplica


class LeaseConfig(BaseModel):
    """Admission leases: credits the scheduler grants ingress replicas (core/leases.py)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Grant credits while there is headroom (False: every request takes the full Admit path)."""
    max_credits: int = Field(4, ge=1)
    """Seats one grant reserves at most, per ingress replica and replica."""
    ttl_ms: float = Field(500.0, gt=0)
    """How long a grant is valid, ms; ingresses refresh before half of it has passed."""


@dataclass
class _Window:
    limit: int = 0
    """Placements the ingress may have made on this replica in all (this epoch)."""
    noticed: int = 0
    """Placements the scheduler has been told of (Place notices received)."""
    expires_s: float = -math.inf

    def reserved(self, now_s: float) -> int:
        return max(0, self.limit - self.noticed) if now_s < self.expires_s else 0


def free_seats(
    replicas: Iterable[LiveReplica], queued: int, max_in_flight: int, pooled: frozenset[str]
) -> dict[str, int]:
    """Seats each replica offers the fast path now (module docstring, headroom rule). Pooled
    replicas (several Serve replicas behind one application) offer none: Serve's router, not
    the ingress, picks the engine there; nor do replicas that may swap models (the policy
    plans their swaps)."""
    out: dict[str, int] = {}
    for r in replicas:
        if queued or not r.healthy or r.application in pooled or r.swap_profiles:
            out[r.application] = 0
            continue
        seats = min(r.max_num_seqs, max_in_flight) * r.engines
        out[r.application] = max(0, seats - len(r.in_flight) - len(r.evicted))
    return out


class LeaseBook:
    """The scheduler's record of the credit windows it granted (module docstring)."""

    def __init__(self, config: LeaseConfig) -> None:
        self.config = config
        self._windows: dict[tuple[str, str], _Window] = {}

    def noticed(self, ingress: str, application: str) -> None:
        """The ingress told of one placement it made on `application` with its credits."""
        self._windows.setdefault((ingress, application), _Window()).noticed += 1

    def reserved(self, application: str, now_s: float, excluding: str = "") -> int:
        """Seats on `application` granted and not yet seen used (live grants only)."""
        return sum(
            w.reserved(now_s)
            for (ing, app), w in self._windows.items()
            if app == application and ing != excluding
        )

    def grant(self, ingress: str, free: Mapping[str, int], now_s: float) -> dict[str, int]:
        """A new grant for `ingress`, replacing its previous one: the cumulative limit per
        replica (the ingress may place while its count is below it). `free`: seats each replica
        offers now (`free_seats`)."""
        ttl_s = self.config.ttl_ms / 1e3
        holders = {ing for (ing, _), w in self._windows.items() if now_s < w.expires_s}
        share = len(holders | {ingress})
        out: dict[str, int] = {}
        for app, seats in free.items():
            w = self._windows.setdefault((ingress, app), _Window())
            others = self.reserved(app, now_s, excluding=ingress)
            credits = 0
            if self.config.enabled:
                fair = -(-seats // share)  # ceil: every live ingress gets its part
                credits = min(self.config.max_credits, fair, max(0, seats - others))
            w.limit = w.noticed + credits
            w.expires_s = now_s + ttl_s
            out[app] = w.limit
        return out

    def offer(
        self,
        ingress: str,
        replicas: Iterable[LiveReplica],
        queued: int,
        max_in_flight: int,
        pooled: frozenset[str],
        policy_takes_leases: bool,
        now_s: float,
    ) -> dict[str, int]:
        """The scheduler's answer to `ingress`'s grant request (a `Sync` or `Lease` call) now:
        `grant` over the seats the replicas offer (`free_seats`), none at all when the policy
        cannot record placements made outside it (GlobalPolicy.supports_leases) or leases are
        off."""
        free = free_seats(replicas, queued, max_in_flight, pooled)
        if not (self.config.enabled and policy_takes_leases):
            free = dict.fromkeys(free, 0)
        return self.grant(ingress, free, now_s)

    def forget_ingress(self, ingress: str) -> None:
        """Drop an ingress's windows (it restarted with a new id)."""
        for key in [k for k in self._windows if k[0] == ingress]:
            del self._windows[key]
