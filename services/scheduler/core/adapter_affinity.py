"""LoRA-adapter-aware placement inside the SLO score (services/scheduler/README.md).

A request naming an adapter runs fastest where the adapter is loaded; elsewhere the replica
loads it first (a cheap swap: an adapter is megabytes, not a model's gigabytes) and unloads the
least recently used one when its slots are full. For such a request each eligible replica i
gets, from the adapter index (which adapters each replica holds: what its state reports,
`EngineStatus.loaded_adapters`, plus the adapters of requests placed there since that report
changed, which the replica loads when they arrive) and its hardware profile:

    loaded_i  = the adapter is in i's index
    load_i    = 0 if loaded_i else load_s                     the adapter load, planned
    queue_i   = T_prefill(1, pending_i) + model load_i        work ahead in i's engine
    ttft_i    = queue_i + load_i + T_prefill(1, I)            predicted time to first token
    feasible  : ttft_i <= slack_fraction * (deadline - now)   the SLO slack it may spend
    evicts_i  = not loaded_i and i's slots are full           the load unloads another adapter
    score_i   = ttft_i + swap_penalty_s * evicts_i

The choice matters only when some eligible replicas hold the adapter and others do not; when
all or none do, nothing is pinned (the SLO policy keeps its order; a replica loads on demand).
Otherwise the feasible replica with the lowest score wins: affinity (no load, no other
adapter evicted) against slack (a loaded replica too busy for this request's deadline loses to
an idle one that loads the adapter). swap_penalty_s prices what evicting an adapter costs the
others: the requests of the adapter it unloads, which may be wanted next, pay a load to get it
back.
When no replica is feasible, nothing is pinned either and the SLO policy places the request as it
would without adapters (the replica then loads the adapter on demand). A chosen replica
without the adapter gets an adapter-load decision (`Decisions.load_adapter`) before the
placement.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.prefix_affinity import (
    PrefixAffinityConfig,
    prefill_model,
    queue_delay_s,
)
from shared.domain import Request


class AdapterAffinityConfig(BaseModel):
    """LoRA-adapter-aware placement in the SLO score (off: placement ignores adapters)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    enabled: bool = False
    """Place a request naming an adapter where the adapter is loaded, when the SLO slack
    allows, else where loading it costs least (the `rwt-adapter` placer turns it on)."""
    slots: int = Field(1, ge=1)
    """Adapters each replica holds at once (the replicas' `adapters.slots`, vLLM's
    max_loras): the index forgets a replica's least recently used adapter beyond it."""
    load_s: float = Field(0.05, ge=0)
    """Seconds one adapter load takes on a replica (`slomesh profile --adapters` measures
    it on vLLM)."""
    swap_penalty_s: float = Field(0.2, ge=0)
    """Seconds added to the score of a replica that must unload another adapter to load this
    one (what the load costs the requests of the adapter it evicts)."""
    slack_fraction: float = Field(0.8, gt=0, le=1)
    """A replica is feasible when its predicted TTFT is within this fraction of the time left
    to the request's TTFT deadline."""


@dataclass(frozen=True, slots=True)
class AdapterScore:
    """One replica's terms of the score (seconds)."""

    replica: str
    loaded: bool
    ttft_s: float
    feasible: bool
    score: float


class AdapterIndex:
    """Which adapters each replica holds: the ones it reported (its status' loaded_adapters)
    and, until its report changes, the ones placed there since (least recently used first,
    at most `slots`: a replica unloads its least recently used adapter to load another)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._reported: dict[str, tuple[str, ...]] = {}
        self._placed: dict[str, OrderedDict[str, None]] = {}

    def observe(self, replica: str, loaded: tuple[str, ...]) -> None:
        """`replica`'s state reports `loaded`: a changed report replaces what was placed."""
        if self._reported.get(replica, ()) != loaded:
            self._reported[replica] = loaded
            self._placed.pop(replica, None)

    def holds(self, replica: str, adapter: str) -> bool:
        return adapter in self.adapters(replica)

    def adapters(self, replica: str) -> list[str]:
        held = dict.fromkeys(self._reported.get(replica, ()))
        for adapter in self._placed.get(replica, ()):
            held.pop(adapter, None)
            held[adapter] = None
        return list(held)[-self.slots :]

    def record(self, replica: str, adapter: str) -> None:
        """A request with `adapter` was placed on `replica`: it loads it there if need be."""
        placed = self._placed.setdefault(replica, OrderedDict())
        placed[adapter] = None
        placed.move_to_end(adapter)

    def drop_replica(self, replica: str) -> None:
        self._reported.pop(replica, None)
        self._placed.pop(replica, None)


class AdapterAffinity:
    """The score above over an index kept up to date from the placements it is told of."""

    def __init__(
        self, config: AdapterAffinityConfig, prefix: PrefixAffinityConfig | None = None
    ) -> None:
        self.cfg = config
        self.prefill_cfg = prefix if prefix is not None else PrefixAffinityConfig()
        self.index = AdapterIndex(config.slots)
        self.pins = 0
        """Requests placed by adapter affinity."""
        self.loads = 0
        """Adapter loads planned."""

    def scores(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> list[AdapterScore]:
        assert request.adapter is not None
        slack = request.ttft_deadline_abs_s - now_s
        out = []
        for inst in eligible:
            self.index.observe(inst.name, inst.status().loaded_adapters)
            prefill = prefill_model(inst, request.model, self.prefill_cfg)
            loaded = self.index.holds(inst.name, request.adapter)
            load = 0.0 if loaded else self.cfg.load_s
            ttft = (
                queue_delay_s(inst, request.model, prefill) + load + prefill(request.input_tokens)
            )
            evicts = not loaded and len(self.index.adapters(inst.name)) >= self.cfg.slots
            penalty = self.cfg.swap_penalty_s if evicts else 0.0
            out.append(
                AdapterScore(
                    replica=inst.name,
                    loaded=loaded,
                    ttft_s=ttft,
                    feasible=ttft <= self.cfg.slack_fraction * slack,
                    score=ttft + penalty,
                )
            )
        return out

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> AdapterScore | None:
        """Where `request` goes (its score says whether the adapter must be loaded there), or
        None (no adapter, or no replica with the slack for it)."""
        if not self.cfg.enabled or request.adapter is None or not eligible:
            return None
        scores = self.scores(request, eligible, now_s)
        if all(s.loaded for s in scores) or not any(s.loaded for s in scores):
            return None  # loaded everywhere or nowhere: where it goes does not matter for it
        feasible = [s for s in scores if s.feasible]
        if not feasible:
            return None
        best = min(feasible, key=lambda s: (s.score, s.replica))
        self.pins += 1
        self.loads += not best.loaded
        return best

    def record_placement(self, replica: str, request: Request) -> None:
        """`request` went to `replica` (pinned or not): its adapter is loaded there now."""
        if request.adapter is not None:
            self.index.record(replica, request.adapter)

    def forget(self, replica: str) -> None:
        self.index.drop_replica(replica)
