"""What global policies may see of and do to serving instances (metadata only, never prompts).

The simulator and the live scheduler each provide objects satisfying `InstanceHandle`.
"""

from __future__ import annotations

from typing import Protocol

from services.replica.core.engine_core import EngineStatus
from shared.domain import HardwareProfile, Request


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

    def submit(self, request: Request, now_s: float) -> None:
        """Hand the request to the instance's engine queue."""
        ...

    def evict(self, request_ids: list[str], now_s: float) -> list[str]: ...

    def resume(self, request_ids: list[str], now_s: float) -> list[str]: ...


class Rejector(Protocol):
    def reject(self, request: Request, reason: str, now_s: float) -> None:
        """Answer the request with a clear rejection (admission control)."""
        ...
