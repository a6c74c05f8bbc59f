"""The decisions of one event as they are made: the builder of a `ClusterOutput`.

Policies write every decision here (place, place a batch, reject, evict, resume, prewarm,
swap)
instead of acting on an instance. Decisions are numbered in the order they are made, and the
builder keeps, per instance, what they will change once applied (`change`, `placed`, `state`),
so a policy that reads an instance again in the same event (QLM pulls until the engine window
is full) sees it as it will be: core/projection.py shows instances to policies that way.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from services.scheduler.core.cluster_view import InstanceView, PendingChange, RequestState
from services.scheduler.core.output import (
    BatchPlacement,
    ClusterOutput,
    Eviction,
    LeaseGrant,
    ModelSwap,
    Placement,
    Rejection,
    Resume,
    ScalingSignal,
)
from shared.domain import Request
from shared.domain.engine import SliceEntry


@dataclass
class _Pending:
    """One instance's share of the decisions so far."""

    placed: dict[str, Request] = field(default_factory=dict)
    states: dict[str, RequestState] = field(default_factory=dict)
    """Where the decisions leave a request here ("waiting" placed or resumed, "evicted")."""
    prewarmed: list[str] = field(default_factory=list)
    swap_to: str | None = None
    """The model a swap decided in this event makes active (None: no swap decided)."""
    change: PendingChange = field(default_factory=PendingChange)


def _name(instance: InstanceView | str) -> str:
    return instance if isinstance(instance, str) else instance.name


class Decisions:
    """Collects one event's decisions (module docstring). Also a `Rejector`."""

    def __init__(self, now_s: float = 0.0) -> None:
        self.now_s = now_s
        self._order = itertools.count()
        self._placements: list[Placement] = []
        self._batches: list[BatchPlacement] = []
        self._rejections: list[Rejection] = []
        self._evictions: list[Eviction] = []
        self._resumes: list[Resume] = []
        self._swaps: list[ModelSwap] = []
        self._leases: list[LeaseGrant] = []
        self._scaling: list[ScalingSignal] = []
        self._pending: dict[str, _Pending] = {}
        self._rejected: set[str] = set()

    # ---- decisions ------------------------------------------------------------------------
    def place(self, request: Request, instance: InstanceView | str, leased: bool = False) -> None:
        """Run `request` on `instance` (leased: the ingress already did; book it only)."""
        name = _name(instance)
        self._placements.append(Placement(next(self._order), request, name, leased))
        self._added(name, request)

    def place_batch(
        self, instance: InstanceView | str, entries: Iterable[SliceEntry], iterations: int
    ) -> None:
        """A pre-formed batch for one slice of `iterations` output tokens per member."""
        name = _name(instance)
        members = tuple(entries)
        self._batches.append(BatchPlacement(next(self._order), name, members, iterations))
        for e in members:
            self._added(name, e.request)

    def reject(
        self,
        request: Request,
        reason: str,
        now_s: float | None = None,
        *,
        drop_reason: str | None = None,
        retry_after_s: float = 1.0,
        queued: bool = False,
    ) -> None:
        """Answer `request` with a rejection (the `Rejector` protocol's call shape)."""
        if drop_reason is None:
            shed = request.sheddable and reason.startswith("shed")
            drop_reason = "sheddable-saturated" if shed else "deadline-infeasible"
        self._rejected.add(request.request_id)
        self._rejections.append(
            Rejection(next(self._order), request, reason, drop_reason, retry_after_s, queued)
        )

    def evict(self, instance: InstanceView, request_ids: Iterable[str]) -> list[str]:
        """Take those of `request_ids` that `instance` has in service out of it; returns them."""
        pending = self._of(instance.name)
        done: list[str] = []
        for rid in dict.fromkeys(request_ids):
            state = self.state(instance, rid)
            if state not in ("waiting", "running"):
                continue
            done.append(rid)
            pending.states[rid] = "evicted"
            pending.change = pending.change.plus(
                PendingChange(
                    evicted_waiting=int(state == "waiting"),
                    evicted_running=int(state == "running"),
                )
            )
        if done:
            self._evictions.append(Eviction(next(self._order), instance.name, tuple(done)))
        return done

    def resume(self, instance: InstanceView, request_ids: Iterable[str]) -> list[str]:
        """Put those of `request_ids` that `instance` holds evicted back in service."""
        pending = self._of(instance.name)
        done = [r for r in dict.fromkeys(request_ids) if self.state(instance, r) == "evicted"]
        for rid in done:
            pending.states[rid] = "waiting"
            pending.change = pending.change.plus(PendingChange(added=1, resumed=1))
        if done:
            self._resumes.append(Resume(next(self._order), instance.name, tuple(done)))
        return done

    def prewarm(self, instance: InstanceView | str, model: str) -> None:
        """Keep `model` staged in `instance`'s host memory so a later swap is a warm one."""
        name = _name(instance)
        self._swaps.append(ModelSwap(next(self._order), name, model, "prewarm"))
        self._of(name).prewarmed.append(model)

    def swap(self, instance: InstanceView | str, model: str) -> None:
        """Make `model` the GPU-active model of `instance` (QLM's swap): the requests placed
        there before finish on the model they run, then the engine loads `model`; requests of
        `model` placed after it run once it is loaded."""
        name = _name(instance)
        self._swaps.append(ModelSwap(next(self._order), name, model, "load"))
        self._of(name).swap_to = model

    def load_adapter(self, instance: InstanceView | str, model: str, adapter: str) -> None:
        """Load LoRA `adapter` of `model` on `instance` (a cheap swap: the engine stalls for
        it between steps); placements after it find it loaded."""
        name = _name(instance)
        self._swaps.append(ModelSwap(next(self._order), name, model, "load", adapter))

    def grant(self, lease: LeaseGrant) -> None:
        self._leases.append(lease)

    def signal(self, scaling: ScalingSignal) -> None:
        self._scaling.append(scaling)

    # ---- what the decisions so far change -------------------------------------------------
    def change(self, instance: str) -> PendingChange | None:
        """The pending change on `instance` (None: nothing decided there yet)."""
        p = self._pending.get(instance)
        return None if p is None else p.change

    def placed(self, instance: str) -> list[Request]:
        """Requests placed on `instance` by these decisions, in order."""
        p = self._pending.get(instance)
        return [] if p is None else list(p.placed.values())

    def prewarmed(self, instance: str) -> list[str]:
        p = self._pending.get(instance)
        return [] if p is None else list(p.prewarmed)

    def swap_to(self, instance: str) -> str | None:
        """The model a swap decided in this event makes active on `instance` (None: none)."""
        p = self._pending.get(instance)
        return None if p is None else p.swap_to

    def state(self, instance: InstanceView, request_id: str) -> RequestState | None:
        """Where `instance` will hold `request_id` once these decisions are applied."""
        p = self._pending.get(instance.name)
        if p is not None and request_id in p.states:
            return p.states[request_id]
        return instance.holds(request_id)

    def mark(self) -> int:
        """A position in the decisions so far (see placements_since)."""
        return len(self._placements)

    def placements_since(self, mark: int) -> list[Placement]:
        """Placements decided after `mark` was taken, in order."""
        return self._placements[mark:]

    def rejected(self, request_id: str) -> bool:
        return request_id in self._rejected

    def placed_anywhere(self, request_id: str) -> str | None:
        for name, p in self._pending.items():
            if request_id in p.placed:
                return name
        return None

    # ---- the output -------------------------------------------------------------------------
    def build(self, queued: Iterable[str] = ()) -> ClusterOutput:
        return ClusterOutput(
            now_s=self.now_s,
            placements=tuple(self._placements),
            batches=tuple(self._batches),
            queued=tuple(queued),
            rejections=tuple(self._rejections),
            evictions=tuple(self._evictions),
            resumes=tuple(self._resumes),
            swaps=tuple(self._swaps),
            leases=tuple(self._leases),
            scaling=tuple(self._scaling),
        )

    # ---- internals ----------------------------------------------------------------------------
    def _of(self, instance: str) -> _Pending:
        p = self._pending.get(instance)
        if p is None:
            p = self._pending[instance] = _Pending()
        return p

    def _added(self, name: str, request: Request) -> None:
        pending = self._of(name)
        pending.placed[request.request_id] = request
        pending.states[request.request_id] = "waiting"
        pending.change = pending.change.plus(
            PendingChange(
                added=1,
                prefill_tokens=request.input_tokens,
                output_tokens=request.output_tokens_to_generate,
                placed_models=(request.model,),
            )
        )
