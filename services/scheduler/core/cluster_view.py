"""What the cluster core sees of serving instances (metadata only, never prompts).

The simulator and the live scheduler each provide objects satisfying `InstanceView` (read
only); the core's decisions about them are data (core/output.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineStatus


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One request an instance holds, as metadata (for clairvoyant reference policies).

    remaining_output_tokens uses the true length in the simulator; prefill_tokens is the KV still
    to compute; context_tokens the KV the request holds (or will hold once prefilled).
    """

    ttft_deadline_abs_s: float
    running: bool
    prefill_tokens: int
    context_tokens: int
    remaining_output_tokens: int


@dataclass(frozen=True, slots=True)
class PendingChange:
    """What the decisions of the event being handled will change on one instance once applied
    (core/decisions.py): the view reports its status as it will be then (`status_after`)."""

    added: int = 0
    """Requests placed or resumed here (they join the engine queue)."""
    evicted_waiting: int = 0
    """Waiting (or just placed) requests taken out of service."""
    evicted_running: int = 0
    """Running requests taken out of service."""
    resumed: int = 0
    """Evicted requests put back in service (counted in `added` too)."""
    prefill_tokens: int = 0
    """Prompt tokens of the placed requests."""
    output_tokens: int = 0
    """Output tokens the placed requests will generate (max_tokens when not known)."""
    placed_models: tuple[str, ...] = ()
    """The model of each request placed here, in placement order (resumed ones not listed):
    a replica with several models runs only those of its active model (live_view.py)."""

    def plus(self, other: PendingChange) -> PendingChange:
        return PendingChange(
            self.added + other.added,
            self.evicted_waiting + other.evicted_waiting,
            self.evicted_running + other.evicted_running,
            self.resumed + other.resumed,
            self.prefill_tokens + other.prefill_tokens,
            self.output_tokens + other.output_tokens,
            self.placed_models + other.placed_models,
        )


RequestState = Literal["waiting", "running", "evicted", "batched", "done"]
"""Where an instance holds a request: queued, in the batch, out of service, in a pre-formed
batch, or generated in full (a static batch keeps those until the batch ends)."""


class InstanceView(Protocol):
    """A serving instance as the cluster core sees it: read only. Decisions go into the core's
    output (core/output.py); whoever runs the core applies them."""

    @property
    def name(self) -> str: ...

    @property
    def gpu(self) -> str: ...

    def serves(self, model: str) -> bool:
        """Whether this instance has the model in its placement (it may need a swap first)."""
        ...

    def profile(self, model: str) -> HardwareProfile: ...

    def status(self) -> EngineStatus: ...

    def status_after(self, change: PendingChange) -> EngineStatus:
        """`status()` once `change` is applied (how this instance counts waiting and running)."""
        ...

    def work_items(self) -> list[WorkItem]:
        """Every request the instance holds (waiting, running, evicted)."""
        ...

    def holds(self, request_id: str) -> RequestState | None:
        """Where the instance holds `request_id` (None: not here)."""
        ...

    @property
    def token_budget(self) -> int:
        """Tokens one engine step may compute (max_num_batched_tokens)."""
        ...

    @property
    def max_num_seqs(self) -> int:
        """Requests the engine runs at once at most."""
        ...

    def load_time_s(self, model: str) -> float:
        """Seconds to make `model` GPU-active from its current tier (0 when it already is)."""
        ...


class Rejector(Protocol):
    def reject(self, request: Request, reason: str, now_s: float) -> None:
        """Answer the request with a clear rejection (admission control)."""
        ...
