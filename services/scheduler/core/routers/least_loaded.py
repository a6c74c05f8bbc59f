"""Fewest outstanding requests (waiting + running), ties to the first (Ray Serve-style LB)."""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.routers.base import Router
from shared.domain import Request


class LeastLoadedRouter(Router):
    name = "least-loaded"

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        def load(inst: InstanceView) -> int:
            st = inst.status()
            return st.waiting + st.running + st.evicted

        return min(eligible, key=load)
