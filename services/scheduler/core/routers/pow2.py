"""Power of two choices on ongoing requests: Ray Serve's default request router.

Source read: ray 2.60.0 (commit b7f4259e944bf6959f721b106adc366ddfa0c356),
ray/serve/_private/request_router/pow_2_router.py (`PowerOfTwoChoicesRequestRouter.
choose_replicas`) and request_router.py (`_select_from_candidate_replicas`). Rule:

    i, j ~ two distinct replicas drawn uniformly at random (in random order)
    choose argmin_{k in (i, j), q_k < max_ongoing} q_k      (ties: the first drawn)

with q_k the replica's ongoing requests (queued + running + evicted here). When neither accepts,
Ray retries with backoff; here the request goes to the less loaded of the two anyway (the
replicas' own queues hold it). One replica: it; two: both, in random order.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.routers.base import Router
from shared.domain import Request


class Pow2Params(BaseModel):
    """Parameters of the power-of-two-choices router."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    seed: int = Field(0, ge=0)
    """Seed of the router's own random draws (runs are reproducible)."""
    max_ongoing_requests: int | None = Field(None, ge=1)
    """A replica with this many ongoing requests does not accept (Ray's per-replica limit);
    None: no limit."""


def ongoing(inst: InstanceView) -> int:
    """Requests a replica holds: queued, running and evicted."""
    st = inst.status()
    return st.waiting + st.running + st.evicted


def draw_two(rng: random.Random, eligible: Sequence[InstanceView]) -> list[InstanceView]:
    """Ray's candidate draw: every replica when one, both in random order when two, else two
    distinct replicas uniformly at random."""
    n = len(eligible)
    if n == 1:
        return [eligible[0]]
    if n == 2:
        return [eligible[0], eligible[1]] if rng.getrandbits(1) else [eligible[1], eligible[0]]
    i = rng.randrange(n)
    j = rng.randrange(n - 1)
    if j >= i:
        j += 1
    return [eligible[i], eligible[j]]


def least_ongoing(candidates: Sequence[InstanceView], limit: int | None) -> InstanceView:
    """The candidate with the fewest ongoing requests among those under `limit` (ties: the first);
    when none is under it, the least loaded of all."""
    accepting = [c for c in candidates if limit is None or ongoing(c) < limit]
    return min(accepting or candidates, key=ongoing)


class Pow2Router(Router):
    name = "pow2"
    params_model = Pow2Params

    def __init__(self, params: Pow2Params | None = None) -> None:
        self.params = params or Pow2Params()
        self._rng = random.Random(self.params.seed)

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        return least_ongoing(draw_two(self._rng, eligible), self.params.max_ongoing_requests)
