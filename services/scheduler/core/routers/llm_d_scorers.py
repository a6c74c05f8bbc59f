"""Weighted scorers and a max-score picker: llm-d router's default endpoint-picker profile.

Source read: llm-d/llm-d-router at commit ebab687927f5331c1b39defcb579a07951bce56c:
pkg/epp/config/loader/defaults.go (`loadDefaultConfig`: queue-scorer weight 2,
kv-cache-utilization-scorer weight 2, prefix-cache-scorer weight 3, max-score-picker),
scheduling/scorer/queuedepth/queue.go, scheduling/scorer/kvcacheutilization/
kvcache_utilization.go, scheduling/scorer/prefix/plugin.go, scheduling/picker/maxscore/picker.go
and requestcontrol/dataproducer/approximateprefix/plugin.go (the index: blocks of the prompts
routed to each endpoint, LRU bounded by the endpoint's KV blocks). For endpoint k, with w_k its
waiting requests, u_k its KV cache usage in [0, 1], m_k the prompt's leading blocks believed
cached there and n the prompt's blocks:

    queue_k  = (max_j w_j - w_k) / (max_j w_j - min_j w_j)     (1 when all equal)
    kv_k     = 1 - u_k
    prefix_k = m_k / n                                            (0 without a prompt prefix)
    score_k  = 2·queue_k + 2·kv_k + 3·prefix_k
    choose   = argmax_k score_k, ties broken at random (the picker shuffles first)

The chosen endpoint's index gains the prompt's blocks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.prefix_index import PrefixIndex
from services.scheduler.core.routers.base import Router
from shared.domain import Request
from shared.domain.prefix import DEFAULT_BLOCK_SIZE_TOKENS

FALLBACK_KV_BLOCKS = 262144 // DEFAULT_BLOCK_SIZE_TOKENS
"""Index capacity of an endpoint without a hardware profile (blocks)."""


class LlmdScorerParams(BaseModel):
    """Weights of llm-d's default scheduling profile."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    queue_weight: float = Field(2.0, ge=0)
    """Weight of the queue scorer (fewest waiting requests, min-max normalised)."""
    kv_cache_weight: float = Field(2.0, ge=0)
    """Weight of the KV-cache-utilisation scorer (1 - used fraction)."""
    prefix_weight: float = Field(3.0, ge=0)
    """Weight of the approximate prefix-cache scorer (matched fraction of the prompt's blocks)."""
    seed: int = Field(0, ge=0)
    """Seed of the picker's tie-breaking shuffle."""


def queue_scores(waiting: Sequence[int]) -> list[float]:
    lo, hi = min(waiting), max(waiting)
    if hi == lo:
        return [1.0] * len(waiting)
    return [(hi - w) / (hi - lo) for w in waiting]


def kv_usage(inst: InstanceView) -> float:
    st = inst.status()
    return st.kv_used_blocks / st.kv_total_blocks if st.kv_total_blocks > 0 else 0.0


class LlmdScorerRouter(Router):
    name = "llm-d-scorers"
    params_model = LlmdScorerParams

    def __init__(self, params: LlmdScorerParams | None = None) -> None:
        self.params = params or LlmdScorerParams()
        self._rng = random.Random(self.params.seed)
        self.index = PrefixIndex()

    def _capacity(self, inst: InstanceView, model: str) -> int:
        try:
            kv = inst.profile(model).kv_capacity_tokens
        except ValueError:  # a live replica without a profile
            return FALLBACK_KV_BLOCKS
        return kv // DEFAULT_BLOCK_SIZE_TOKENS

    def scores(self, request: Request, eligible: Sequence[InstanceView]) -> list[float]:
        """score_k of each endpoint, in `eligible` order (see the module docstring)."""
        for inst in eligible:
            if inst.name not in self.index.replicas():
                self.index.set_capacity(inst.name, self._capacity(inst, request.model))
        p = self.params
        queue = queue_scores([i.status().waiting for i in eligible])
        n = request.prefix.num_blocks if request.prefix is not None else 0
        out = []
        for inst, q in zip(eligible, queue, strict=True):
            prefix = self.index.matched_blocks(inst.name, request) / n if n else 0.0
            out.append(
                p.queue_weight * q
                + p.kv_cache_weight * (1 - kv_usage(inst))
                + p.prefix_weight * prefix
            )
        return out

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        scored = list(zip(self.scores(request, eligible), eligible, strict=True))
        self._rng.shuffle(scored)
        best = max(score for score, _ in scored)
        chosen = next(inst for score, inst in scored if score == best)
        self.index.record_placement(chosen.name, request)
        return chosen
