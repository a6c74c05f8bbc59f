"""The cluster scheduler's decisions as data: what one event makes the cluster do.

Like vLLM v1's `SchedulerOutput` one level up: the cluster core (core/cluster_core.py) takes an
event (core/events.py) and returns a `ClusterOutput`; it never calls an instance. Whoever runs
the core applies the output, in `ordered()` order, with one applier: the live scheduler's shell
(services/scheduler/applier.py: Admit replies, Evict/Resume RPCs) and the simulator
(slomesh/sim/applier.py: the simulated engines). Every decision that touches an instance carries
`order`, its position among all decisions of the output, so both appliers carry them out in the
sequence the policy made them (an eviction that makes room before the placements it was for).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shared.domain import Request
from shared.domain.engine import SliceEntry


@dataclass(frozen=True, slots=True)
class Placement:
    """Run `request` on `instance` now (its engine queue orders it there)."""

    order: int
    request: Request
    instance: str
    leased: bool = False
    """Already placed by an ingress on lease credits: book it, nothing to send."""


@dataclass(frozen=True, slots=True)
class BatchPlacement:
    """A pre-formed batch for one slice on `instance` (SCLS / SLO-ODBS): each member runs at
    most `iterations` more output tokens there, then comes back as a slice end."""

    order: int
    instance: str
    entries: tuple[SliceEntry, ...]
    iterations: int


@dataclass(frozen=True, slots=True)
class Rejection:
    """Answer `request` with a rejection now: it is not (or no longer) served."""

    order: int
    request: Request
    reason: str
    """Human-readable: the rule that failed (the error message)."""
    drop_reason: str = "deadline-infeasible"
    """Short machine-readable cause (admission.DROP_REASONS, x-slomesh-drop-reason)."""
    retry_after_s: float = 1.0
    """Retry-After hint, seconds (0: retrying will not help)."""
    queued: bool = False
    """The request had been queued (a shed or expiry, not the arrival's own verdict)."""


@dataclass(frozen=True, slots=True)
class Eviction:
    """Take these in-service requests out of service on `instance` until a `Resume`."""

    order: int
    instance: str
    request_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resume:
    """Put these evicted requests of `instance` back in service."""

    order: int
    instance: str
    request_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModelSwap:
    """Stage `model` on `instance`: `prewarm` keeps it in host memory so a later swap is warm;
    `load` makes it GPU-active (QLM's swap): the requests placed there before it finish on the
    model they run (nothing accepted is dropped), then the engine loads `model`. Adapter loads
    take the same shape with `adapter` naming the adapter of `model`."""

    order: int
    instance: str
    model: str
    kind: str = "prewarm"
    """"prewarm" or "load"."""
    adapter: str | None = None
    """A LoRA adapter of `model` to stage (None: the base model)."""


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """Credits for ingress `ingress`: cumulative placement limits per replica (core/leases.py)."""

    ingress: str
    limits: tuple[tuple[str, int], ...]
    """(replica, limit) pairs."""
    expires_s: float
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class ScalingSignal:
    """What one model's queue tells the autoscaler (replicas it needs to meet its SLOs)."""

    model: str
    queued: int
    """Requests of the model waiting in the global queue."""
    desired_replicas: int | None = None
    """The scaling policy's target (None: no scaling policy runs in the core)."""


InstanceAction = Placement | BatchPlacement | Rejection | Eviction | Resume | ModelSwap


@dataclass(frozen=True, slots=True)
class ClusterOutput:
    """Every decision one event caused, as data (module docstring)."""

    now_s: float
    placements: tuple[Placement, ...] = ()
    batches: tuple[BatchPlacement, ...] = ()
    queued: tuple[str, ...] = ()
    """Admitted requests the policy holds in its queue (no instance yet)."""
    rejections: tuple[Rejection, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    resumes: tuple[Resume, ...] = ()
    swaps: tuple[ModelSwap, ...] = ()
    leases: tuple[LeaseGrant, ...] = ()
    scaling: tuple[ScalingSignal, ...] = ()

    def ordered(self) -> Iterator[InstanceAction]:
        """Every decision in the order the policy made it (the appliers' order)."""
        actions: list[InstanceAction] = [
            *self.placements,
            *self.batches,
            *self.rejections,
            *self.evictions,
            *self.resumes,
            *self.swaps,
        ]
        return iter(sorted(actions, key=lambda a: a.order))

    @property
    def slice_budgets(self) -> dict[str, int]:
        """Output tokens each batch member may produce in its slice (absent: run to the end)."""
        return {e.request.request_id: b.iterations for b in self.batches for e in b.entries}

    def placed_on(self, request_id: str) -> str | None:
        """The instance this output placed `request_id` on (a placement or a batch), if any."""
        for p in self.placements:
            if p.request.request_id == request_id:
                return p.instance
        for b in self.batches:
            if any(e.request.request_id == request_id for e in b.entries):
                return b.instance
        return None

    def rejection_of(self, request_id: str) -> Rejection | None:
        return next((r for r in self.rejections if r.request.request_id == request_id), None)

    @property
    def empty(self) -> bool:
        return not (
            self.placements
            or self.batches
            or self.queued
            or self.rejections
            or self.evictions
            or self.resumes
            or self.swaps
            or self.leases
            or self.scaling
        )
