"""Round-robin per model over the instances that serve it (vLLM fleets behind a plain LB)."""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.routers.base import Router
from shared.domain import Request


class RoundRobinRouter(Router):
    name = "round-robin"
    fast_path_agrees = False

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        i = self._next.get(request.model, 0)
        self._next[request.model] = i + 1
        return eligible[i % len(eligible)]
