"""Prefix-cache-aware placement inside the SLO score (services/scheduler/README.md).

For a request whose prompt has block hashes, each eligible replica i gets, from the approximate
prefix index (prefix_index.py) and the replica's hardware profile (T_prefill(1, L) of the
profile's prefill model, SCLS Eq. 5 form):

    cached_i  = prompt tokens believed cached on i
    prefill_i = T_prefill(1, I − cached_i)                    own prefill of the uncached suffix
    saved_i   = T_prefill(1, I) − prefill_i                   compute the cache saves
    queue_i   = T_prefill(1, pending_i) + load_i              work ahead in i's engine, model load
    ttft_i    = queue_i + prefill_i                           predicted time to first token
    tpot_i    = tau_decode(mean context of i's running, running_i + 1)    its time per token
    feasible  : ttft_i ≤ slack_fraction · (deadline − now)    the SLO slack it may spend
    score_i   = ttft_i + decode_tokens · tpot_i − benefit_weight · saved_i

The feasible replica with the lowest score wins, but only when the choice matters for the cache:
its saving must exceed the smallest saving among the eligible replicas by `min_saved_s` (a
system prompt cached everywhere pins nothing). Otherwise, or when no replica is feasible (the
affinity replica is too busy for this request's slack), there is no pin and the SLO policy
places the request as it would without prefixes. benefit_weight > 0 counts the saved prefill
as capacity returned to everyone queued, not only as this request's shorter TTFT.

The TTFT terms see only prefill queued ahead: a replica whose decode batch is full still scores
as idle. decode_tokens > 0 weighs that load against the affinity: ttft_i + k·tpot_i is the
predicted time of the request's k-th token, tpot_i growing with the replica's running requests
and their context (the decode model of latency_slo_admitter.py, as llm-d's latency predictor
sees an endpoint). Without it new conversations pile onto the replica that first cached their
system prompt (every tie of the TTFT terms goes to it) and its TPOT passes the SLO while the
other replicas idle; llm-d's router spreads them with its queue and KV-cache-usage scorers next
to the prefix scorer. A replica without a hardware profile has no decode term.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.latency_slo_admitter import predicted_tpot_s
from services.scheduler.core.prefix_index import PrefixIndex
from shared.domain import Request
from shared.domain.prefix import DEFAULT_BLOCK_SIZE_TOKENS


class PrefixAffinityConfig(BaseModel):
    """Prefix-cache-aware placement in the SLO score (off: placement ignores prefixes)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    enabled: bool = False
    """Pin a request to the replica whose cached prefix saves it the most prefill, when the
    SLO slack allows (the `slomesh` stack turns it on; `slomesh-no-prefix` leaves it off)."""
    benefit_weight: float = Field(1.0, ge=0)
    """Weight of the prefill seconds saved against the predicted TTFT in the score (0: the
    request's own TTFT alone)."""
    slack_fraction: float = Field(0.8, gt=0, le=1)
    """A replica is feasible when its predicted TTFT is within this fraction of the time left
    to the request's TTFT deadline."""
    decode_tokens: float = Field(0.0, ge=0)
    """Output tokens whose predicted decode time counts in the score: the score is the
    predicted time of the request's k-th token less the weighted saving, so a replica with a
    heavy decode batch loses requests it would win on TTFT alone (0: TTFT alone)."""
    min_saved_s: float = Field(0.002, ge=0)
    """The winner's saving must exceed the smallest saving among the eligible replicas by more
    than this (seconds of prefill); otherwise nothing is pinned."""
    block_size_tokens: int = Field(DEFAULT_BLOCK_SIZE_TOKENS, ge=1)
    """Tokens per KV block, for each replica's index capacity (KV capacity tokens / this)."""
    fallback_prefill_tokens_s: float = Field(2000.0, gt=0)
    """Prefill rate (prompt tokens/s) assumed for a replica without a hardware profile (a live
    CPU replica of a model outside the catalogue): T_prefill(1, L) = L / this."""
    fallback_kv_capacity_tokens: int = Field(262144, ge=0)
    """KV capacity assumed for the index of a replica without a hardware profile."""


@dataclass(frozen=True, slots=True)
class ReplicaScore:
    """One replica's terms of the score (seconds; cached in tokens)."""

    replica: str
    cached_tokens: int
    saved_s: float
    ttft_s: float
    tpot_s: float
    feasible: bool
    score: float


PrefillTime = Callable[[int], float]
"""Seconds to prefill this many prompt tokens alone on a replica."""


def prefill_model(inst: InstanceView, model: str, cfg: PrefixAffinityConfig) -> PrefillTime:
    """T_prefill(1, L) from `inst`'s profile, else L at the fallback rate."""
    try:
        prof = inst.profile(model)
    except ValueError:  # a live replica without a profile
        return lambda n: n / cfg.fallback_prefill_tokens_s if n > 0 else 0.0
    return lambda n: prof.prefill_time_s(1, n) if n > 0 else 0.0


def kv_capacity_tokens(inst: InstanceView, model: str, cfg: PrefixAffinityConfig) -> int:
    try:
        return inst.profile(model).kv_capacity_tokens
    except ValueError:
        return cfg.fallback_kv_capacity_tokens


def queue_delay_s(inst: InstanceView, model: str, prefill: PrefillTime) -> float:
    """Work ahead of a new request in `inst`'s engine: its pending prefill plus a model load."""
    return prefill(inst.status().pending_prefill_tokens) + inst.load_time_s(model)


class PrefixAffinity:
    """The score above over an index it keeps up to date from the placements it is told of."""

    def __init__(self, config: PrefixAffinityConfig, index: PrefixIndex | None = None) -> None:
        self.cfg = config
        self.index = index if index is not None else PrefixIndex()
        self.pins = 0
        """Requests pinned to their affinity replica."""

    def scores(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> list[ReplicaScore]:
        slack = request.ttft_deadline_abs_s - now_s
        out = []
        for inst in eligible:
            self._known(inst, request.model)
            prefill = prefill_model(inst, request.model, self.cfg)
            cached = self.index.cached_tokens(inst.name, request)
            full = prefill(request.input_tokens)
            own = prefill(request.input_tokens - cached)
            ttft = queue_delay_s(inst, request.model, prefill) + own
            saved = full - own
            tpot = predicted_tpot_s(inst, request) if self.cfg.decode_tokens > 0 else None
            tpot_s = 0.0 if tpot is None else tpot
            out.append(
                ReplicaScore(
                    replica=inst.name,
                    cached_tokens=cached,
                    saved_s=saved,
                    ttft_s=ttft,
                    tpot_s=tpot_s,
                    feasible=ttft <= self.cfg.slack_fraction * slack,
                    score=ttft + self.cfg.decode_tokens * tpot_s - self.cfg.benefit_weight * saved,
                )
            )
        return out

    def choose(
        self, request: Request, eligible: Sequence[InstanceView], now_s: float
    ) -> str | None:
        """The replica to pin `request` to, or None (no prefix, no distinctive saving, or no
        replica with the slack for it)."""
        if not self.cfg.enabled or request.prefix is None or not eligible:
            return None
        scores = self.scores(request, eligible, now_s)
        feasible = [s for s in scores if s.feasible]
        if not feasible:
            return None
        best = min(feasible, key=lambda s: (s.score, s.replica))
        floor = min(s.saved_s for s in scores)
        if best.saved_s - floor <= self.cfg.min_saved_s:
            return None
        self.pins += 1
        return best.replica

    def record_placement(self, inst: InstanceView, request: Request) -> None:
        """`request` went to `inst` (pinned or not): its prefix is now believed cached there."""
        self._known(inst, request.model)
        self.index.record_placement(inst.name, request)

    def forget(self, replica: str) -> None:
        self.index.drop_replica(replica)

    def _known(self, inst: InstanceView, model: str) -> None:
        if inst.name not in self.index.replicas():
            cap = kv_capacity_tokens(inst, model, self.cfg) // self.cfg.block_size_tokens
            self.index.set_capacity(inst.name, cap)
