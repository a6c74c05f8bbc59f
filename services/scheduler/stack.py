"""A serving stack: global policy, engine queue order, batching mode and preemption mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from services.replica.scorpio.config import ScorpioConfig
from services.scheduler.global_policy import GlobalPolicy


@dataclass(frozen=True, slots=True)
class ServingStack:
    name: str
    description: str
    global_policy: Callable[[], GlobalPolicy]
    queue_policy: str
    engine_mode: Literal["continuous", "static"] = "continuous"
    preemption_mode: Literal["recompute", "swap", "auto"] = "recompute"
    scorpio: ScorpioConfig | None = None
    """SCORPIO's engine guards (TTFT guard, VBS admission, credit batching); None: off."""
