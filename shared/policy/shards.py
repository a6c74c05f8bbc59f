"""Scheduler shards: which shard owns which replica, and which shard a request goes to.

Both rules are pure functions of names, so every shard and every ingress replica computes the
same answer from what it knows, without asking anyone (no central hop):

- `divide_replicas`: the replicas of each model are dealt round-robin, in name order, over the
  live shards sorted by a per-model hash. Each shard gets floor(n/K) or ceil(n/K) replicas of a
  model with n replicas (balanced: the global policy of a shard plans its replicas whole), and
  which shard gets the extra one varies by model, so with many models no shard is always the
  larger. A membership change moves replicas; a move costs only bookkeeping (streams in flight
  stay where they are, their reports go to the shard that admitted them).
- `shard_order`: weighted rendezvous hashing of a request's key over the shards that serve its
  model, weight = that shard's ready replicas of the model. The first shard is where the
  request is admitted, the rest are the order of failover when it does not answer. Adding or
  removing a shard moves only the keys that hash to it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping


def _unit(*parts: str) -> float:
    """A hash of `parts` as a float in (0, 1): stable across processes (unlike hash())."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 2)


def divide_replicas(
    replicas: Iterable[tuple[str, str]], shards: Iterable[str]
) -> dict[str, set[str]]:
    """Shard name -> the replica applications it owns, from (application, model) pairs and the
    live shard names (module docstring). Every replica has exactly one owner while a shard
    lives; with no shard, nobody owns anything."""
    live = sorted(set(shards))
    owned: dict[str, set[str]] = {s: set() for s in live}
    if not live:
        return owned
    by_model: dict[str, list[str]] = {}
    for application, model in replicas:
        by_model.setdefault(model, []).append(application)
    for model, apps in by_model.items():
        order = sorted(live, key=lambda s: _unit("model", model, s))
        for i, app in enumerate(sorted(set(apps))):
            owned[order[i % len(order)]].add(app)
    return owned


def shard_order(key: str, weights: Mapping[str, float]) -> list[str]:
    """Shards by preference for the request `key` (weighted rendezvous hashing: score
    -w / ln(u), u a hash of (key, shard) in (0, 1)); shards with weight <= 0 come last, in name
    order."""
    scored = [(-w / math.log(_unit(key, s)), s) for s, w in weights.items() if w > 0]
    ranked = [s for _, s in sorted(scored, key=lambda t: (-t[0], t[1]))]
    return ranked + sorted(s for s, w in weights.items() if w <= 0)
