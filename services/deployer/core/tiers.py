"""Model tiers of each placed replica for QLM's model swapping (QLM §5; deployer README).

A replica placed by HELR (UELLM Algorithm 2) has one GPU-active model; the models it may swap to
are the other served models that fit the same GPUs (the planner decides which, by HELR's layer
rule). This module splits them into host-warm and cold:

- Host memory: each node's `host_memory_bytes` is shared equally by the replicas with a stage on
  that node. A replica keeps, on each of its nodes, the slice of a warm model its stages there
  would hold, estimated by the active model's layer share on that node. A warm model of
  `w` bytes therefore needs w·share(n) <= budget(n) on every node n, i.e. the replica's warm
  models may total at most host_budget_bytes = min_n budget(n) / share(n).
- Warm: candidates in the given preference order (the planner's: most-demanded first, then
  smaller first), each taken if it still fits in host_budget_bytes (first-fit, so a later smaller
  model can take room a larger one could not); cold: the rest.

Pure: no I/O; the replica's ModelTiers (services/replica/core/model_tiers.py) is seeded with it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TierPlan:
    """Residency of the models one replica may serve: GPU-active, host-warm, cold."""

    active: str
    warm: tuple[str, ...]
    cold: tuple[str, ...]
    host_budget_bytes: int

    def as_args(self) -> dict[str, Any]:
        """The replica args' "model_tiers" value (JSON/YAML-able)."""
        return {
            "active": self.active,
            "warm": list(self.warm),
            "cold": list(self.cold),
            "host_budget_bytes": self.host_budget_bytes,
        }


@dataclass(frozen=True, slots=True)
class TierReplica:
    """What the tier plan needs of one replica.

    node_share: fraction of the active model's layers on each node it spans (sums to 1).
    candidates: other models that fit its GPUs, in preference order.
    """

    active: str
    node_share: Mapping[str, float]
    candidates: tuple[str, ...]


def plan_tiers(
    replicas: Sequence[TierReplica],
    weight_bytes: Mapping[str, int],
    host_memory_bytes: Mapping[str, int],
) -> list[TierPlan]:
    """One TierPlan per replica, in order (module docstring). Nodes missing from
    host_memory_bytes have none."""
    sharing = Counter(n for r in replicas for n, s in r.node_share.items() if s > 0)
    plans: list[TierPlan] = []
    for r in replicas:
        limits = [
            host_memory_bytes.get(n, 0) / sharing[n] / s for n, s in r.node_share.items() if s > 0
        ]
        budget = math.floor(min(limits)) if limits else 0
        warm: list[str] = []
        cold: list[str] = []
        used = 0
        for m in r.candidates:
            if m == r.active:
                continue
            w = weight_bytes[m]
            if used + w <= budget:
                warm.append(m)
                used += w
            else:
                cold.append(m)
        plans.append(TierPlan(r.active, tuple(warm), tuple(cold), budget))
    return plans
