"""The header-named tenants an ingress replica keeps apart: a bounded table with idle expiry.

A fairness id (`x-gateway-inference-fairness-id`) that is neither an API key's tenant nor a
configured tenant (`tenancy.tenants`) becomes a tenant of its own only while fewer than
`tenancy.max_header_tenants` such ids are live on this replica; beyond that it shares the
overflow tenant (`tenancy.overflow_tenant`, "overflow": one weight, one VTC counter, one label).
An id unseen for `tenancy.tenant_idle_s` is forgotten, freeing its place. Each admission costs
O(1) amortised (an insertion-ordered dict: refreshed ids move to the end, expiry pops from the
front), so memory and cost per request stay flat however many distinct ids clients invent.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable


class TenantTable:
    """Live header-named tenants of one ingress replica (module docstring)."""

    def __init__(
        self,
        cap: int,
        idle_s: float,
        overflow: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if cap < 1 or not idle_s > 0:
            raise ValueError(f"cap must be >= 1 and idle_s > 0, got {cap}, {idle_s}")
        self.cap = cap
        self.idle_s = idle_s
        self.overflow = overflow
        self._clock = clock
        self._last_seen: OrderedDict[str, float] = OrderedDict()
        self.overflowed = 0
        """Requests mapped to the overflow tenant so far."""

    def __len__(self) -> int:
        return len(self._last_seen)

    def __contains__(self, name: object) -> bool:
        return name in self._last_seen

    def admit(self, name: str) -> str:
        """The tenant a request naming fairness id `name` is served as: `name` while it has a
        place (kept, or taken from a free one), else the overflow tenant."""
        now = self._clock()
        self.expire(now)
        if name in self._last_seen:
            self._last_seen.move_to_end(name)
            self._last_seen[name] = now
            return name
        if len(self._last_seen) < self.cap:
            self._last_seen[name] = now
            return name
        self.overflowed += 1
        return self.overflow

    def expire(self, now_s: float) -> int:
        """Forget ids unseen for idle_s; returns how many."""
        dropped = 0
        while self._last_seen:
            name, seen = next(iter(self._last_seen.items()))
            if now_s - seen < self.idle_s:
                break
            del self._last_seen[name]
            dropped += 1
        return dropped
