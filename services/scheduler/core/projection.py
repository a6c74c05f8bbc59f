"""Instances as they will be once the current event's decisions are applied.

The cluster core shows every instance to its policies through one `Projected` view, stable for
the life of the core (policies may keep it): it reads the instance (the simulator's engine, the
live scheduler's books of a replica) and adds what the decisions of the event being handled will
change there (core/decisions.py). A policy that places a request and reads the instance again
in the same event sees the request there, as it did when policies acted on instances directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from services.scheduler.core.cluster_view import (
    InstanceView,
    PendingChange,
    RequestState,
    WorkItem,
)
from services.scheduler.core.decisions import Decisions
from shared.domain import HardwareProfile
from shared.domain.engine import EngineStatus


class Projected:
    """An InstanceView: `base` plus the pending decisions of `current()` (module docstring)."""

    def __init__(self, base: InstanceView, current: Callable[[], Decisions]) -> None:
        self.base = base
        self._current = current

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def gpu(self) -> str:
        return self.base.gpu

    @property
    def token_budget(self) -> int:
        return self.base.token_budget

    @property
    def max_num_seqs(self) -> int:
        return self.base.max_num_seqs

    def serves(self, model: str) -> bool:
        return self.base.serves(model)

    def profile(self, model: str) -> HardwareProfile:
        return self.base.profile(model)

    def status(self) -> EngineStatus:
        change = self._current().change(self.base.name)
        return self.base.status() if change is None else self.base.status_after(change)

    def status_after(self, change: PendingChange) -> EngineStatus:
        pending = self._current().change(self.base.name)
        return self.base.status_after(change if pending is None else pending.plus(change))

    def work_items(self) -> list[WorkItem]:
        placed = self._current().placed(self.base.name)
        return self.base.work_items() + [
            WorkItem(
                r.ttft_deadline_abs_s,
                False,
                r.input_tokens,
                r.input_tokens,
                r.output_tokens_to_generate,
            )
            for r in placed
        ]

    def holds(self, request_id: str) -> RequestState | None:
        return self._current().state(self.base, request_id)

    def load_time_s(self, model: str) -> float:
        """A model prewarmed by this event loads at host-memory speed from now on."""
        t = self.base.load_time_s(model)
        if t <= 0 or math.isinf(t) or model not in self._current().prewarmed(self.base.name):
            return t
        p = self.base.profile(model)
        return min(t, p.weight_bytes / p.swap_bytes_s)
