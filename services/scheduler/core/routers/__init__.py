"""Routers, registered by name (one registry for this family)."""

from __future__ import annotations

from services.scheduler.core.routers.base import Router
from services.scheduler.core.routers.least_loaded import LeastLoadedRouter
from services.scheduler.core.routers.oracle_ttft import OracleTTFTRouter
from services.scheduler.core.routers.prefix_only import PrefixOnlyRouter
from services.scheduler.core.routers.round_robin import RoundRobinRouter
from shared.policy import Registry

ROUTERS: Registry[Router] = Registry(
    "router",
    {
        RoundRobinRouter.name: RoundRobinRouter,
        LeastLoadedRouter.name: LeastLoadedRouter,
        OracleTTFTRouter.name: OracleTTFTRouter,
        PrefixOnlyRouter.name: PrefixOnlyRouter,
    },
)

__all__ = ["ROUTERS", "Router"]
