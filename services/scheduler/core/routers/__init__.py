"""Routers, registered by name (one registry for this family)."""

from __future__ import annotations

from services.scheduler.core.routers.base import Router
from services.scheduler.core.routers.least_loaded import LeastLoadedRouter
from services.scheduler.core.routers.llm_d_scorers import LlmdScorerRouter
from services.scheduler.core.routers.multiplex import MultiplexRouter
from services.scheduler.core.routers.oracle_ttft import OracleTTFTRouter
from services.scheduler.core.routers.pow2 import Pow2Router
from services.scheduler.core.routers.pow2_prefix import Pow2PrefixRouter
from services.scheduler.core.routers.prefix_only import PrefixOnlyRouter
from services.scheduler.core.routers.round_robin import RoundRobinRouter
from services.scheduler.core.routers.static_placement import StaticRouter
from shared.policy import Registry

ROUTERS: Registry[Router] = Registry(
    "router",
    {
        cls.name: cls.build
        for cls in (
            RoundRobinRouter,
            LeastLoadedRouter,
            OracleTTFTRouter,
            PrefixOnlyRouter,
            Pow2Router,
            Pow2PrefixRouter,
            LlmdScorerRouter,
            MultiplexRouter,
            StaticRouter,
        )
    },
)
"""name -> Router.build(params): a fresh router from its parameters (a stack's placer params)."""

__all__ = ["ROUTERS", "Router"]
