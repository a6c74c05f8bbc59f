"""Prefix-cache affinity alone (the peers' approach: Ray Serve LLM's PrefixCacheAffinityRouter,
llm-d's prefix scorer, SGLang's router): the replica believed to hold the longest cached prefix
of the prompt (services/scheduler/core/prefix_index.py), ties broken by the fewest outstanding
requests, then by order. No SLO, queue or slack enters the choice. The index learns from its own
placements and forgets least recently used blocks beyond each replica's KV capacity."""

from __future__ import annotations

from collections.abc import Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.prefix_index import PrefixIndex
from services.scheduler.core.routers.base import Router
from shared.domain import Request
from shared.domain.prefix import DEFAULT_BLOCK_SIZE_TOKENS

FALLBACK_KV_CAPACITY_TOKENS = 262144
"""Index capacity of a replica without a hardware profile (KV tokens)."""


class PrefixOnlyRouter(Router):
    name = "prefix-only"

    def __init__(self, block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS) -> None:
        self.index = PrefixIndex()
        self.block_size_tokens = block_size_tokens

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        for inst in eligible:
            if inst.name not in self.index.replicas():
                try:
                    kv = inst.profile(request.model).kv_capacity_tokens
                except ValueError:  # a live replica without a profile
                    kv = FALLBACK_KV_CAPACITY_TOKENS
                cap = kv // self.block_size_tokens
                self.index.set_capacity(inst.name, cap)

        def key(inst: InstanceView) -> tuple[int, int]:
            st = inst.status()
            return (-self.index.matched_blocks(inst.name, request), st.waiting + st.running)

        chosen = min(eligible, key=key)
        self.index.record_placement(chosen.name, request)
        return chosen
