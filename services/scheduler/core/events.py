"""What happens to the cluster: the events the cluster core (core/cluster_core.py) takes.

Each event is data, handled by `ClusterCore.handle(event) -> ClusterOutput` (core/output.py).
The live scheduler's shell makes them from RPCs and its timer (Admit, Report, Place, Status
probes, the tick); the simulator from its event loop (arrivals, engine steps, finishes). The
same event makes the same decisions in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain import Request
from shared.domain.engine import SliceEntry


@dataclass(frozen=True, slots=True)
class Arrival:
    """A new request: admit (place or queue) or reject it."""

    request: Request
    now_s: float


@dataclass(frozen=True, slots=True)
class LeasedPlacement:
    """An ingress placed `request` on `instance` with lease credits; book it (core/leases.py)."""

    request: Request
    instance: str
    now_s: float


@dataclass(frozen=True, slots=True)
class StepEnd:
    """An engine step of `instance` ended (room may have freed: it may pull)."""

    instance: str
    now_s: float


@dataclass(frozen=True, slots=True)
class Finish:
    """`request` finished on `instance` after `output_tokens` tokens (or failed: 0)."""

    request_id: str
    instance: str
    output_tokens: int
    now_s: float
    request: Request | None = None
    """The finished request when the caller has it (the simulator); else the core's books."""


@dataclass(frozen=True, slots=True)
class EngineReject:
    """`instance`'s engine turned `request` away (an engine-side guard)."""

    request: Request
    instance: str
    reason: str
    now_s: float


@dataclass(frozen=True, slots=True)
class SliceEnd:
    """A batch member left `instance` unfinished at the end of its slice (pre-formed batches)."""

    entry: SliceEntry
    instance: str
    now_s: float


@dataclass(frozen=True, slots=True)
class Abort:
    """The caller of `request_id` went away (or its admission failed): forget it."""

    request_id: str
    now_s: float


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """Whether `instance` answers (a Status probe's outcome, or a replica found gone)."""

    instance: str
    healthy: bool
    now_s: float


@dataclass(frozen=True, slots=True)
class Tick:
    """Periodic: queued requests that can no longer start in time are answered, every
    instance may pull, the policy re-checks its predictions."""

    now_s: float


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
