"""Prefix-cache affinity over power of two choices: Ray Serve LLM's PrefixCacheAffinityRouter.

Source read: ray 2.60.0 (commit b7f4259e944bf6959f721b106adc366ddfa0c356),
ray/llm/_internal/serve/routing_policies/prefix_aware/prefix_aware_router.py
(`_prefix_match_best_replicas`, `choose_replicas`, `on_request_routed`). Rule, with q_k the
ongoing requests of replica k, m_k the prompt's leading blocks the router believes k holds and
n the prompt's blocks:

    balanced     = max_k q_k - min_k q_k <= imbalanced_threshold    (Ray's default: infinity)
    match_rate   = max_k m_k / n
    candidates   = pow2 draw                          if not balanced or no prompt
                 = argmin_k size_k (all ties)         if match_rate < match_rate_threshold (0.1)
                 = argmax_k m_k (all ties)            otherwise
    choose       = the candidate with the fewest ongoing requests (ties: the first)

size_k is the number of blocks the router believes k holds ("smallest tenant"). The chosen
replica's tree gains the prompt (only the prompt, as Ray inserts the input text at routing).
Ray keeps a character-level prefix tree without eviction by default; here the tree is the
scheduler's block-hash index (prefix_index.py), unbounded likewise, so a match is counted in KV
blocks instead of characters.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.prefix_index import PrefixIndex
from services.scheduler.core.routers.base import Router
from services.scheduler.core.routers.pow2 import draw_two, least_ongoing, ongoing
from shared.domain import Request

UNBOUNDED_BLOCKS = 1 << 40
"""Index capacity per replica: Ray's tree does not evict unless told to."""


class Pow2PrefixParams(BaseModel):
    """Parameters of the prefix-cache-affinity router."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = Field(0, ge=0)
    """Seed of the power-of-two fallback's draws."""
    imbalanced_threshold: float | None = Field(None, ge=0)
    """Queue-length spread above which the router ignores prefixes; None: never (Ray's inf)."""
    match_rate_threshold: float = Field(0.1, ge=0, le=1)
    """Below this fraction of the prompt matched, go to the replicas holding the least."""


class Pow2PrefixRouter(Router):
    name = "pow2-prefix"
    params_model = Pow2PrefixParams

    def __init__(self, params: Pow2PrefixParams | None = None) -> None:
        self.params = params or Pow2PrefixParams()
        self._rng = random.Random(self.params.seed)
        self.index = PrefixIndex()

    def candidates(self, request: Request, eligible: Sequence[InstanceView]) -> list[InstanceView]:
        for inst in eligible:
            if inst.name not in self.index.replicas():
                self.index.set_capacity(inst.name, UNBOUNDED_BLOCKS)
        fallback = draw_two(self._rng, eligible)
        prefix = request.prefix
        if prefix is None or prefix.num_blocks == 0:
            return fallback
        loads = [ongoing(i) for i in eligible]
        limit = self.params.imbalanced_threshold
        if limit is not None and max(loads) - min(loads) > limit:
            return fallback
        matched = {i.name: self.index.matched_blocks(i.name, request) for i in eligible}
        best = max(matched.values())
        if best / prefix.num_blocks < self.params.match_rate_threshold:
            smallest = min(self.index.size(i.name) for i in eligible)
            return [i for i in eligible if self.index.size(i.name) == smallest]
        return [i for i in eligible if matched[i.name] == best]

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        chosen = least_ongoing(self.candidates(request, eligible), None)
        self.index.record_placement(chosen.name, request)
        return chosen
