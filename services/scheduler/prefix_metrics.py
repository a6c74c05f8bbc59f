"""Prefix-cache metrics of the scheduler, through ray.serve.metrics.

The scheduler does not see the engines' caches; these figures come from its approximate
per-replica prefix index (core/prefix_index.py) as placements are recorded: the prompt tokens
placed, those the index predicted cached on the chosen replica, their ratio, and how many
requests the SLO-aware placement pinned to their prefix's replica. Policies without an index
(no prefix awareness) export nothing.
"""

from __future__ import annotations

from typing import Any

from services.scheduler.core.prefix_index import PrefixIndex


def _prefix_holder(policy: Any) -> Any:
    """What holds the policy's prefix index as `index`: `slomesh`'s prefix affinity, found
    through the pinning policies wrapped around it (adapter placement, core/pinning.py), or the
    prefix-only router; else None."""
    while policy is not None:
        for holder in (getattr(policy, "affinity", None), getattr(policy, "router", None)):
            if isinstance(getattr(holder, "index", None), PrefixIndex):
                return holder
        policy = vars(policy).get("inner")  # not getattr: a wrapper delegates what it lacks
    return None


def prefix_index_of(policy: Any) -> PrefixIndex | None:
    """The policy's prefix index (`_prefix_holder`), or None."""
    holder = _prefix_holder(policy)
    return None if holder is None else holder.index


class PrefixMetrics:
    def __init__(self) -> None:
        from ray.serve import metrics

        self._hit_rate = metrics.Gauge(
            "slomesh_prefix_hit_rate",
            "share of the placed prompt tokens the scheduler's prefix index predicted cached on "
            "the chosen replica (approximate: the index mirrors what was placed, LRU by KV size)",
        )
        self._tokens = metrics.Counter(
            "slomesh_prefix_tokens_total",
            "prompt tokens placed (kind=prompt) and of those predicted cached (kind=cached)",
            tag_keys=("kind",),
        )
        self._pins = metrics.Counter(
            "slomesh_prefix_pins_total",
            "requests the SLO-aware placement pinned to the replica holding their prefix",
        )
        self._seen = {"prompt": 0, "cached": 0, "pins": 0}

    def report(self, policy: Any) -> None:
        index = prefix_index_of(policy)
        if index is None:
            return
        self._hit_rate.set(index.hit_rate)
        now = {
            "prompt": index.placed_prompt_tokens,
            "cached": index.placed_hit_tokens,
            "pins": int(getattr(_prefix_holder(policy), "pins", 0)),
        }
        for kind, value in now.items():
            delta = value - self._seen[kind]
            self._seen[kind] = value
            if delta <= 0:  # Ray refuses inc(0)
                continue
            if kind == "pins":
                self._pins.inc(delta)
            else:
                self._tokens.inc(delta, tags={"kind": kind})
