"""The ingress's lease fast path, in the simulator, with the live code on both sides.

Live (services/ingress/fast_path.py), each ingress replica holds the credits the scheduler
granted it (`CreditLedger`, services/ingress/core/credits.py) and places a request itself on the
replica with the most credit left, no scheduler call before the stream opens, while it holds
one; the scheduler hears of the placement later, in a batched `Sync` call
(services/ingress/shard_outbox.py), records it in its books and the policy's
(`AdmissionCore.place_leased`) and answers with a new grant (`LeaseBook.offer`,
services/scheduler/core/leases.py). Here the same ledger decides at the same moments
(`due_before_take`, `due_after_take`, `refresh_due` after a full-path admission) and the same
lease book grants; only the calls between them are simulated:

- a placement notice waits in its ingress replica's outbox as the live outbox holds it: sent at
  once when a grant is due (a flush), else `interval_ms` after it came (`headroom_interval_ms`
  while the ledger holds unspent credits); one call in flight at a time, a flush during one goes
  when it returns;
- a call reaches the scheduler `call_s` after it leaves, and its grant reaches the ingress
  `call_s` after that;
- a request placed on a credit gives its seat back to its ingress replica's ledger when its
  stream ends (`refill`), as live;
- completion reports keep the delays the scheduler's report log measured live
  (slomesh/sim/live_view.py); the `Sync` that carried one answered with a grant, so a report
  reaching the books also carries the notices waiting in its ingress replica's outbox and sends
  that replica a grant. The scheduler never hears of a finish before the placement it ends:
  live the report follows the notice in the same outbox, here it is held until the notice came.

Pure: the simulator passes its clock and runs the timers this returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from services.ingress.core.credits import Credit, CreditLedger
from services.ingress.shard_outbox import OutboxConfig
from shared.domain import Request


class SimLeaseConfig(BaseModel):
    """The live ingress's side of the fast path, as the simulator runs it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    enabled: bool = True
    """Simulate the fast path (False: every arrival takes the full path; the simulator then
    runs no `SimLeases`)."""
    outbox: OutboxConfig = OutboxConfig()
    """How the ingress batches its notices (the live ingress's `scheduler.outbox`)."""
    call_s: float = Field(0.0, ge=0)
    """Seconds one way of a `Sync` call: the notices reach the scheduler this long after they
    leave, and its grant comes back this long after that."""


Timer = tuple[float, Callable[[float], None]]
"""A callback the simulator runs at a time (its own event)."""


class LeaseHost(Protocol):
    """What the fast path calls in the simulator (slomesh/sim/simulator.py)."""

    def notice(self, ingress: str, request: Request, application: str, now_s: float) -> None:
        """The scheduler hears of a placement made on a credit (and books it)."""
        ...

    def grant(self, ingress: str, now_s: float) -> tuple[list[Credit], float]:
        """The scheduler's grant for `ingress` now, and how long it lives (s)."""
        ...


@dataclass
class _Ingress:
    ident: str
    ledger: CreditLedger = field(default_factory=CreditLedger)
    notices: list[tuple[Request, str]] = field(default_factory=list)
    urgent: bool = False
    in_flight: bool = False
    send_at: float | None = None
    """When the waiting notices go (their interval's end), None: no send is timed."""


class SimLeases:
    """Every ingress replica's credits and outbox (module docstring)."""

    EPOCH = "sim"
    """The one scheduler epoch of a simulated run (its scheduler never restarts)."""

    def __init__(
        self,
        config: SimLeaseConfig,
        ingresses: int,
        host: LeaseHost,
        timer: Callable[[Timer], None],
    ) -> None:
        self.cfg = config
        self.host = host
        self._timer = timer
        self.ingresses = [_Ingress(f"ingress-{k}") for k in range(ingresses)]
        self._unnoticed: set[str] = set()
        """Requests placed on a credit whose notice the scheduler has not had yet."""
        self._held: dict[str, Callable[[float], None]] = {}
        """Their finishes, reported before the notice came: delivered right after it."""
        self.placed = 0
        """Requests placed on credits."""
        self._on_credit: dict[str, tuple[_Ingress, str]] = {}
        """Requests placed on credits and not finished: the ingress replica and the replica."""

    def take(self, ingress: int, request: Request, now_s: float) -> str | None:
        """The replica ingress replica `ingress` places `request` on with a credit (its notice
        queued), or None: the full path."""
        ing = self.ingresses[ingress]
        if ing.ledger.due_before_take(request.model, now_s):
            self._flush(ing, now_s)
        credit = ing.ledger.take(request.model, now_s)
        if credit is None:
            return None
        self.placed += 1
        self._unnoticed.add(request.request_id)
        self._on_credit[request.request_id] = (ing, credit.application)
        ing.notices.append((request, credit.application))
        if ing.ledger.due_after_take(request.model, credit.application, now_s):
            self._flush(ing, now_s)
        elif not ing.in_flight and ing.send_at is None:
            self._wait(ing, now_s)
        return credit.application

    def admitted(self, ingress: int, model: str, now_s: float) -> None:
        """The full path admitted a request there: a grant is asked for if one is due."""
        ing = self.ingresses[ingress]
        if ing.ledger.refresh_due(model, now_s):
            self._flush(ing, now_s)

    def finished(self, request_id: str, now_s: float) -> None:
        """`request_id`'s stream ended at its ingress: placed on a credit, its seat comes back
        to that ingress replica's ledger (`CreditLedger.refill`, as the live FastPath's
        `report` gives it back)."""
        placed = self._on_credit.pop(request_id, None)
        if placed is not None:
            ing, application = placed
            ing.ledger.refill(application, self.EPOCH, now_s)

    def unnoticed(self, request_id: str) -> bool:
        """Whether `request_id` was placed on a credit the scheduler has not heard of yet."""
        return request_id in self._unnoticed

    def hold(self, request_id: str, deliver: Callable[[float], None]) -> None:
        """Deliver `request_id`'s report right after its notice (`deliver` at that time: module
        docstring)."""
        self._held[request_id] = deliver

    def reported(self, ingress: int, now_s: float) -> None:
        """A report from ingress replica `ingress` reached the books now: the notices waiting
        there went with it, and its grant comes back."""
        ing = self.ingresses[ingress]
        self._deliver(ing, ing.notices, now_s)
        ing.notices = []
        self._grant_back(ing, now_s, ended_call=False)

    # ---- the outbox ---------------------------------------------------------------------
    def _wait(self, ing: _Ingress, now_s: float) -> None:
        relaxed = ing.ledger.holds_credit(now_s)
        out = self.cfg.outbox
        at = now_s + (out.headroom_interval_ms if relaxed else out.interval_ms) / 1e3
        ing.send_at = at

        def due(t: float) -> None:
            if ing.send_at == at and not ing.in_flight:
                self._send(ing, t)

        self._timer((at, due))

    def _flush(self, ing: _Ingress, now_s: float) -> None:
        ing.urgent = True
        if not ing.in_flight:
            self._send(ing, now_s)

    def _send(self, ing: _Ingress, now_s: float) -> None:
        batch, ing.notices = ing.notices, []
        ing.urgent, ing.in_flight, ing.send_at = False, True, None

        def arrive(t: float) -> None:
            self._deliver(ing, batch, t)
            self._grant_back(ing, t, ended_call=True)

        self._timer((now_s + self.cfg.call_s, arrive))

    def _deliver(self, ing: _Ingress, batch: list[tuple[Request, str]], now_s: float) -> None:
        for request, application in batch:
            self.host.notice(ing.ident, request, application, now_s)
            self._unnoticed.discard(request.request_id)
            held = self._held.pop(request.request_id, None)
            if held is not None:
                held(now_s)

    def _grant_back(self, ing: _Ingress, now_s: float, ended_call: bool) -> None:
        credits, ttl_s = self.host.grant(ing.ident, now_s)

        def granted(t: float) -> None:
            ing.ledger.update(self.EPOCH, credits, ttl_s, t)
            if not ended_call:
                return
            ing.in_flight = False
            if ing.urgent:
                self._send(ing, t)
            elif ing.notices:
                self._wait(ing, t)

        self._timer((now_s + self.cfg.call_s, granted))


def credits_of(limits: Mapping[str, int], models: Mapping[str, str]) -> list[Credit]:
    """A grant's limits as the ingress's ledger takes them (`models`: each replica's model)."""
    return [Credit(app, models[app], "", limit) for app, limit in limits.items()]
