"""Ray Serve's model multiplexing: each replica keeps an LRU of up to k models, loads on a miss,
and a request goes to a replica that has its model when one exists.

Source read: ray 2.60.0 (commit b7f4259e944bf6959f721b106adc366ddfa0c356), installed package:
- ray/serve/multiplex.py, `_ModelMultiplexWrapper.load_model`: a model already loaded moves to
  the most-recently-used end; a miss with `max_num_models_per_replica` models loaded unloads the
  least recently used one, then loads the requested model.
- ray/serve/_private/request_router/request_router.py, `MultiplexMixin.apply_multiplex_routing`:
  the candidates are the replicas that report the model; when none does (or those were tried and
  are full), the replicas with the fewest models loaded; after the matching timeout, all.
- pow_2_router.py, `PowerOfTwoChoicesRequestRouter.choose_replicas`: power of two choices on
  ongoing requests among the candidates (pow2.py here).

Rule here, per request for model m:

    candidates = replicas whose LRU holds m and that accept (ongoing < max_ongoing_requests)
    if none: the replicas with the fewest models in their LRU
    pick = power of two choices among the candidates
    LRU(pick): m to the most-recently-used end; beyond k models the least recently used leaves

A replica's LRU starts with the model its engine has active (its static placement). The router
keeps the LRU itself: a request reaches its replica at once, so the models a replica was sent
last are the ones it reports. With k = 1 (one engine per replica holds one base model, as QLM's
instances do) the replica's engine swaps to the model of a miss once the requests it runs drain.
Ray's matching timeout (a request waiting for a busy matching replica) is not modelled: the
request goes to the least loaded candidate at once and waits in that replica's queue.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.routers.base import Router
from services.scheduler.core.routers.pow2 import draw_two, least_ongoing, ongoing
from shared.domain import Request


class MultiplexParams(BaseModel):
    """Parameters of the multiplexing router."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    max_models_per_replica: int = Field(1, ge=1)
    """k: models one replica keeps loaded (Ray's `max_num_models_per_replica`)."""
    seed: int = Field(0, ge=0)
    """Seed of the power-of-two draws (runs are reproducible)."""
    max_ongoing_requests: int | None = Field(None, ge=1)
    """A replica with this many ongoing requests does not accept (Ray's per-replica limit);
    None: no limit."""


class MultiplexRouter(Router):
    name = "multiplex"
    params_model = MultiplexParams

    def __init__(self, params: MultiplexParams | None = None) -> None:
        self.params = params or MultiplexParams()
        self._rng = random.Random(self.params.seed)
        self.loaded: dict[str, OrderedDict[str, None]] = {}
        """Replica name -> its models, least recently used first."""

    def _lru(self, inst: InstanceView) -> OrderedDict[str, None]:
        lru = self.loaded.get(inst.name)
        if lru is None:
            active = inst.status().active_model
            lru = self.loaded[inst.name] = OrderedDict.fromkeys([active] if active else [])
        return lru

    def _accepts(self, inst: InstanceView) -> bool:
        limit = self.params.max_ongoing_requests
        return limit is None or ongoing(inst) < limit

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> InstanceView:
        model = request.model
        cands = [i for i in eligible if model in self._lru(i) and self._accepts(i)]
        if not cands:
            fewest = min(len(self._lru(i)) for i in eligible)
            cands = [i for i in eligible if len(self._lru(i)) == fewest]
        pick = least_ongoing(draw_two(self._rng, cands), self.params.max_ongoing_requests)
        lru = self._lru(pick)
        lru[model] = None
        lru.move_to_end(model)
        while len(lru) > self.params.max_models_per_replica:
            lru.popitem(last=False)
        return pick
