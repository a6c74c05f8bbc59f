"""What happens to the cluster: the events the cluster core (core/cluster_core.py) takes.

Each event is data, handled by `ClusterCore.handle(event) -> ClusterOutput` (core/output.py).
The live scheduler's shell makes them from RPCs and its timer (Admit, Report, Place, Status
probes, the tick); the simulator from its event loop (arrivals, engine steps, finishes). The
same event makes the same decisions in both. Every event carries the time it happened,
`now_s`, as a keyword (`Arrival(request, now_s=t)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain import Request
from shared.domain.engine import SliceEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class _Event:
    now_s: float
    """When the event happened, on the core's clock (seconds)."""


@dataclass(frozen=True, slots=True)
class Arrival(_Event):
    """A new request: admit (place or queue) or reject it."""

    request: Request


@dataclass(frozen=True, slots=True)
class LeasedPlacement(_Event):
    """An ingress placed `request` on `instance` with lease credits; book it (core/leases.py)."""

    request: Request
    instance: str


@dataclass(frozen=True, slots=True)
class StepEnd(_Event):
    """An engine step of `instance` ended (room may have freed: it may pull)."""

    instance: str


@dataclass(frozen=True, slots=True)
class Finish(_Event):
    """`request` finished on `instance` after `output_tokens` tokens (or failed: 0)."""

    request_id: str
    instance: str
    output_tokens: int
    request: Request | None = None
    """The finished request when the caller has it (the simulator); else the core's books."""


@dataclass(frozen=True, slots=True)
class EngineReject(_Event):
    """`instance`'s engine turned `request` away (an engine-side guard)."""

    request: Request
    instance: str
    reason: str


@dataclass(frozen=True, slots=True)
class SliceEnd(_Event):
    """A batch member left `instance` unfinished at the end of its slice (pre-formed batches)."""

    entry: SliceEntry
    instance: str


@dataclass(frozen=True, slots=True)
class Abort(_Event):
    """The caller of `request_id` went away (or its admission failed): forget it."""

    request_id: str


@dataclass(frozen=True, slots=True)
class ReplicaState(_Event):
    """Whether `instance` answers (a Status probe's outcome, or a replica found gone), or,
    with `handed_over`, that this scheduler shard gave it to another one."""

    instance: str
    healthy: bool
    handed_over: bool = False
    """Unavailable here because another scheduler shard owns it now: it runs what it holds to
    the end (those requests' reports still come here); only no new work goes there from here."""


@dataclass(frozen=True, slots=True)
class Tick(_Event):
    """Periodic: queued requests that can no longer start in time are answered, every
    instance may pull, the policy re-checks its predictions."""


ClusterEvent = (
    Arrival
    | LeasedPlacement
    | StepEnd
    | Finish
    | EngineReject
    | SliceEnd
    | Abort
    | ReplicaState
    | Tick
)
