"""What global policies may see of and do to serving instances (metadata only, never prompts).

The simulator and the live scheduler each provide objects satisfying `InstanceHandle`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

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


class InstanceHandle(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def gpu(self) -> str: ...

    def serves(self, model: str) -> bool:
        """Whether this instance has the model in its placement (it may need a swap first)."""
        ...

    def profile(self, model: str) -> HardwareProfile: ...

    def status(self) -> EngineStatus: ...

    def work_items(self) -> list[WorkItem]:
        """Every request the instance holds (waiting, running, evicted)."""
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

    def prewarm(self, model: str) -> None:
        """Stage `model` in host memory so a later swap is a warm one (may be a no-op)."""
        ...

    def submit(self, request: Request, now_s: float) -> None:
        """Hand the request to the instance's engine queue."""
        ...

    def evict(self, request_ids: list[str], now_s: float) -> list[str]: ...

    def resume(self, request_ids: list[str], now_s: float) -> list[str]: ...


class Rejector(Protocol):
    def reject(self, request: Request, reason: str, now_s: float) -> None:
        """Answer the request with a clear rejection (admission control)."""
        ...
