"""Which queued group a replica serves next, given its virtual queue: bands, then fairness.

QLM's virtual queue orders groups by deadline (and the global scheduler's plan). With tenancy
on, a replica pulling work looks at the non-empty groups of its queue in that order and
  1. keeps those of the most critical band present (strict priority between bands);
  2. among them, keeps the tenant the virtual token counter serves next (the smallest counter,
     fairness/vtc.py), and takes that tenant's first group in queue order.
So the virtual queue still decides the order inside a tenant's work (deadlines, swaps), and
VTC decides whose work goes next. The selector also keeps the counters: the policy reports
queue entries and exits, dispatches, finishes and refunds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from services.scheduler.core.fairness.config import TenancyConfig
from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from shared.domain import Request


class Candidate(Protocol):
    """What the selector needs of a group (QLM's RequestGroup has it)."""

    @property
    def tenant(self) -> str: ...

    @property
    def criticality(self) -> int: ...


G = TypeVar("G", bound=Candidate)


class GroupSelector:
    def __init__(self, config: TenancyConfig | None = None) -> None:
        self.cfg = config if config is not None else TenancyConfig()
        self.vtc = VirtualTokenCounter(self.cfg.vtc)
        self._first: tuple[str, int] | None = None
        """Tenant and criticality of the first arrival."""
        self._many_tenants = False
        self._many_bands = False

    def contended(self, request: Request) -> bool:
        """Whether there is a choice for bands or fairness to make: more than one band (bands
        on) or more than one tenant (fairness on) among the arrivals so far, this one included.
        QLM's direct dispatch of tight classes (qlm/tight_classes.py) bypasses the virtual
        queues, so it applies only where this is False: a shared cluster queues every request
        for bands and fairness to order. Also the selector's clock: the arrival time ages out
        idle tenants' counters (`tenant_idle_s`)."""
        if self._first is None:
            self._first = (request.tenant, request.criticality)
        self._many_tenants |= request.tenant != self._first[0]
        self._many_bands |= request.criticality != self._first[1]
        self.vtc.seen(request.tenant, request.arrival_s)
        self.vtc.forget_idle(request.arrival_s, self.cfg.tenant_idle_s)
        return self.is_contended

    @property
    def is_contended(self) -> bool:
        """`contended` without counting a new arrival."""
        return (self.cfg.bands and self._many_bands) or (
            self.cfg.fairness != "off" and self._many_tenants
        )

    def choose(self, groups: Sequence[G]) -> G | None:
        """The group served next among non-empty `groups` (in virtual-queue order)."""
        if not groups:
            return None
        pool = list(groups)
        if self.cfg.bands:
            top = max(g.criticality for g in pool)
            pool = [g for g in pool if g.criticality == top]
        if self.cfg.fairness == "off":
            return pool[0]
        tenants = list(dict.fromkeys(g.tenant for g in pool))
        chosen = self.vtc.pick(tenants)
        return next(g for g in pool if g.tenant == chosen)

    # ---- accounting ---------------------------------------------------------------------
    def queued(self, request: Request) -> None:
        self.vtc.enqueued(request.tenant)

    def left_queue(self, request: Request) -> None:
        self.vtc.dequeued(request.tenant)

    def dispatched(self, request: Request, predicted_output_tokens: float) -> None:
        self.vtc.charge_dispatch(
            request.request_id,
            request.tenant,
            request.input_tokens,
            min(predicted_output_tokens, float(request.max_tokens)),
            request.tenant_weight,
        )

    def finished(self, request_id: str, output_tokens: int) -> None:
        self.vtc.charge_finish(request_id, output_tokens)

    def refunded(self, request: Request) -> None:
        self.vtc.refund(request.request_id, request.input_tokens)
