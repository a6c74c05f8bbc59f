"""The simulator's applier: carries out the cluster core's decisions on the simulated engines.

One `ClusterOutput` (services/scheduler/core/output.py) at a time, in its `ordered()` order, as
the live scheduler's shell carries out the same output with Admit replies and Evict/Resume calls:
a placement queues the request in the engine (one that can never fit its KV cache is rejected
there, and the scheduler told; one an ingress already placed on a lease credit is only booked),
a batch queues a pre-formed batch for one slice (or, where the
slice budget served is 0, as the live ingress serves it, each member whole), an eviction or
resume moves requests out of or back into service, a prewarm stages a model in host memory, a
swap makes a model active once the requests placed before it are done (as the live replica's
model host does, services/replica/model_host.py), a rejection is recorded. Every instance
touched is woken at the output's time to look at its queue.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from services.scheduler.core.output import (
    BatchPlacement,
    ClusterOutput,
    Eviction,
    ModelSwap,
    Placement,
    Rejection,
    Resume,
)
from shared.domain import Request
from shared.domain.engine import RequestTooLarge, SliceEntry
from slomesh.sim.instance import SimInstance


class ApplierHost(Protocol):
    """What the applier calls back into (the Simulator, slomesh/sim/simulator.py)."""

    def kick(self, inst: SimInstance, now_s: float) -> None: ...

    def reject(self, request: Request, reason: str, now_s: float) -> None: ...

    def record_placement(self, request_id: str, instance: str) -> None: ...

    def too_large(self, request: Request, reason: str, instance: str, now_s: float) -> None:
        """`request`, placed on `instance`, can never fit its KV cache."""
        ...


class SimApplier:
    def __init__(self, host: ApplierHost) -> None:
        self.host = host
        self.instances: dict[str, SimInstance] = {}
        self.slice_tokens: Callable[[int], int] | None = None
        """The slice budget a batch's members are served with, given the one the batch offers
        (0: each runs whole, as a placement); None: the batch's own (its engine slices it)."""

    def add_instance(self, inst: SimInstance) -> None:
        self.instances[inst.name] = inst

    def apply(self, out: ClusterOutput) -> None:
        now = out.now_s
        host = self.host
        for action in out.ordered():
            match action:
                case Placement(leased=True):
                    pass  # an ingress placed it on a credit: it runs there already
                case Placement(request=request, instance=name):
                    self.place(request, name, now)
                case BatchPlacement(instance=name, entries=entries, iterations=iterations):
                    self._batch(self.instances[name], list(entries), iterations, now)
                case Rejection(request=request, reason=reason):
                    host.reject(request, reason, now)
                case Eviction(instance=name, request_ids=ids):
                    inst = self.instances[name]
                    inst.core.evict(list(ids))
                    host.kick(inst, now)
                case Resume(instance=name, request_ids=ids):
                    inst = self.instances[name]
                    inst.core.resume(list(ids), now)
                    host.kick(inst, now)
                case ModelSwap(instance=name, kind="load", adapter=str() as adapter):
                    self.instances[name].core.load_adapter(adapter)
                case ModelSwap(instance=name, model=model, kind="prewarm"):
                    self.instances[name].core.tiers.prewarm(model)
                case ModelSwap(instance=name, model=model, kind="load", adapter=None):
                    inst = self.instances[name]
                    inst.core.swap_to(model)
                    host.kick(inst, now)
                case ModelSwap(instance=name, kind=kind):
                    raise ValueError(f"{name}: the simulator does not apply a '{kind}' swap")

    def place(self, request: Request, instance: str, now_s: float) -> None:
        """Queue `request` in `instance`'s engine (a placement, or an ingress's on a lease
        credit: slomesh/sim/leases.py); one that can never fit its KV cache is rejected there."""
        inst = self.instances[instance]
        try:
            inst.core.add_request(request, now_s)
        except RequestTooLarge as e:
            self.host.too_large(request, str(e), instance, now_s)
            return
        self.host.record_placement(request.request_id, instance)
        self.host.kick(inst, now_s)

    def _batch(
        self, inst: SimInstance, entries: list[SliceEntry], iterations: int, now_s: float
    ) -> None:
        """A pre-formed batch (SCLS, UELLM): members that can never fit are rejected."""
        fitting = []
        for e in entries:
            try:
                inst.core.check_fits(e.request)
            except RequestTooLarge as err:
                self.host.too_large(e.request, str(err), inst.name, now_s)
                continue
            fitting.append(e)
            self.host.record_placement(e.request.request_id, inst.name)
        budget = iterations if self.slice_tokens is None else self.slice_tokens(iterations)
        if fitting and budget:
            inst.core.add_batch(fitting, budget, now_s)
        for e in fitting if not budget else []:  # served whole: the engine's own queue
            inst.core.add_request(e.request, now_s)
        self.host.kick(inst, now_s)
