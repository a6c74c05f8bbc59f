"""The ingress's side of admission leases (the scheduler's is
services/scheduler/core/leases.py): the credits the scheduler granted this ingress replica.

While it holds a credit for a replica serving the request's model, the ingress places the
request there itself (the fast path: no scheduler round trip before the stream opens) and tells
the scheduler afterwards. A grant is a cumulative limit per replica in one scheduler epoch: the
ingress counts its own placements (`taken`) and places while `taken < limit`; a grant from a new
epoch (the scheduler restarted) starts the counts again. Among replicas with credit it picks the
one with the most left (the least loaded as the scheduler saw it). A grant expires `ttl_s` after
its receipt; a refresh is due once half of that has passed, or when no credit is left.

A credit refills when a request this ingress placed on credits of the same epoch finishes
after the grant came (`refill`): its seat is still counted taken in the scheduler's books
until the report reaches it, so the ingress may hand it to its next request without asking;
a grant so bounds the requests the ingress holds at once on the replica instead of the
requests it places, and a steady stream needs a new grant only when it is due. The next
grant (the scheduler's count of the seats then free) starts the refills again from zero, and
an empty grant (a queue formed) ends them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Credit:
    """One replica's entry of a grant."""

    application: str
    model: str
    gpu: str
    limit: int


@dataclass(slots=True)
class _Entry:
    credit: Credit
    taken: int = 0
    refilled: int = 0
    """Seats given back by this ingress's own finished requests since the grant came."""

    @property
    def left(self) -> int:
        return max(0, self.credit.limit - self.taken + self.refilled)


class CreditLedger:
    def __init__(self) -> None:
        self.epoch = ""
        self._entries: dict[str, _Entry] = {}
        self._turn = 0
        """Placements made: where the search for the most credit left starts (ties go round)."""
        self._received_s = -1.0
        self._ttl_s = 0.0

    def update(self, epoch: str, credits: Iterable[Credit], ttl_s: float, now_s: float) -> None:
        """A grant from the scheduler replaces the previous one (counts kept within an epoch)."""
        if epoch != self.epoch:
            self.epoch, self._entries = epoch, {}
        fresh: dict[str, _Entry] = {}
        for c in credits:
            old = self._entries.get(c.application)
            fresh[c.application] = _Entry(c, old.taken if old is not None else 0)
        self._entries = fresh
        self._received_s, self._ttl_s = now_s, ttl_s

    def take(self, model: str, now_s: float) -> Credit | None:
        """Spend one credit on a replica serving `model` (the one with the most left, ties in
        turn); None: no live credit, the request takes the full path."""
        if not self._live(now_s):
            return None
        best: _Entry | None = None
        entries = list(self._entries.values())
        for i in range(len(entries)):
            # ties go round: the scheduler's grants are capped (leases.max_credits) below the
            # free seats, so replicas often have the same credit left; the first one in the
            # grant would take most of the requests
            e = entries[(self._turn + i) % len(entries)]
            if e.credit.model != model or e.left <= 0:
                continue
            if best is None or e.left > best.left:
                best = e
        if best is None:
            return None
        best.taken += 1
        self._turn += 1
        return best.credit

    def give_back(self, application: str, epoch: str) -> None:
        """A placement the scheduler was never told of (its notice failed): the credit is free
        again, or this ingress's window would stay one short for the rest of the epoch."""
        e = self._entries.get(application)
        if e is not None and epoch == self.epoch and e.taken > 0:
            e.taken -= 1

    def refill(self, application: str, epoch: str, now_s: float) -> None:
        """A request placed on `application` with a credit of `epoch` finished: its seat serves
        the next request (module docstring), while the grant lives."""
        e = self._entries.get(application)
        if e is not None and epoch == self.epoch and self._live(now_s):
            e.refilled += 1

    def drop(self, application: str) -> None:
        """`application` failed to open a stream (its process is gone): no more placements on
        it from this grant; the next grant says whether it is back."""
        self._entries.pop(application, None)

    def left(self, model: str, now_s: float) -> int:
        """Credits left for `model` now."""
        if not self._live(now_s):
            return 0
        return sum(e.left for e in self._entries.values() if e.credit.model == model)

    def left_on(self, application: str, now_s: float) -> int:
        """Credits left on `application` now."""
        e = self._entries.get(application)
        if e is None or not self._live(now_s):
            return 0
        return e.left

    def holds_credit(self, now_s: float) -> bool:
        """Whether a live grant has a credit left for any model."""
        return self._live(now_s) and any(e.left > 0 for e in self._entries.values())

    def due_before_take(self, model: str, now_s: float) -> bool:
        """Whether to ask for a new grant before spending a credit on `model`: only once a
        grant came (the first one is asked for after a full-path admission, never while the
        scheduler only rejects), and when `refresh_due`."""
        return bool(self.epoch) and self.refresh_due(model, now_s)

    def due_after_take(self, model: str, application: str, now_s: float) -> bool:
        """Whether to ask for a new grant at once after spending a credit on `application`:
        the last one for `model`, or on that replica. As far as this grant goes the replica is
        full, and the scheduler's admission must see it so before it admits more there (the
        placement's notice would otherwise wait for its batch while other credits last)."""
        return self.left(model, now_s) == 0 or self.left_on(application, now_s) == 0

    def refresh_due(self, model: str, now_s: float) -> bool:
        """Whether to ask for a new grant: none yet, half its life passed, or none left and a
        tenth of its life passed (no headroom: ask again soon, not at every request)."""
        age = now_s - self._received_s
        if self._received_s < 0 or age >= self._ttl_s / 2:
            return True
        return age >= self._ttl_s / 10 and self.left(model, now_s) == 0

    def _live(self, now_s: float) -> bool:
        return self._received_s >= 0 and now_s - self._received_s < self._ttl_s
