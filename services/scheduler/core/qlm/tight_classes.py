"""Two refinements of QLM for the flagship `slomesh` stack: direct dispatch of tight
TTFT classes and eviction that weighs its own cost.

Direct dispatch. QLM holds every request in its virtual queues and lets an instance pull only
while its engine holds fewer than `pull_window_requests` waiting requests. A request whose TTFT
SLO is shorter than the time the window takes to drain (0.5 s on scorpio-mixed, where four
waiting prompts take longer than that to prefill behind a full batch) is then late before it
reaches an engine. With `direct_max_ttft_s` set, such requests skip the queues: at arrival they
go to the instance serving their model with the fewest outstanding requests (one with the model
active first), whose engine orders its queue earliest-deadline-first and, with SCORPIO's TTFT
guard, rejects early what cannot make it.

Cost-aware eviction. QLM evicts looser running requests when an urgent group reaches the head
and the engine has no room. An evicted request is later re-prefilled (prompt and the tokens it
generated; on vLLM the eviction is an abort and a resubmission), which costs engine time that
every other request waits for. With `weigh_cost`, an eviction goes ahead only when
  (a) the head, started now, still makes its deadline: T_prefill(head) <= slack, and
  (b) cost_factor · Σ_v T_prefill(victim v) < room_wait - T_prefill(head),
room_wait being the head's predicted wait for a seat without eviction, T_prefill the instance's
profile (HardwareProfile.prefill_time_s). On a GPU profile a re-prefill costs tens of
milliseconds and eviction proceeds as in the paper; on a CPU replica it costs seconds and
eviction stops. An instance with no profile cannot show that eviction pays, so it does not evict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from shared.domain import HardwareProfile, Request


class TightClassConfig(BaseModel):
    """Which requests skip QLM's virtual queues (direct dispatch)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    direct_max_ttft_s: float | None = Field(None, gt=0)
    """Requests whose TTFT SLO is at most this many seconds go at arrival to the least-loaded
    instance serving their model instead of a virtual queue. None: every request is queued
    (the paper)."""
    active_model_only: bool = False
    """Dispatch directly only to an instance whose engine has the request's model loaded; with
    none, the request is queued, so model swaps stay planned by QLM's global scheduler."""
    yield_to_swaps: bool = False
    """Dispatch directly only to an instance whose virtual queue holds no group of another model:
    while QLM has a swap planned there, new work of the loaded model queues behind it instead
    of keeping the engine busy (on qlm-wc direct dispatch without this starved the swaps)."""
    single_model_only: bool = False
    """Dispatch directly only to an instance that serves no other model the policy has seen
    requests for. On an instance that serves several models QLM's planner must see all of its
    work to batch the swaps (qlm-wc, 300-request probes: 5.36 r/s median with every request
    queued, 3.44 with direct dispatch to the loaded model); an instance of one model (every
    live replica) never swaps, and there QLM's queue only delays work (tight_classes.py)."""
    direct_while_queue_empty: bool = False
    """With bands or tenants contending, tight requests still go directly while the virtual
    queues hold no request: bands and fairness have nothing to choose between then. False:
    every request is queued once bands or tenants contend."""


class EvictionCostConfig(BaseModel):
    """Whether eviction weighs its own cost (re-prefill of the victims) against what it saves."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    weigh_cost: bool = False
    """Evict only when the head can still make its deadline and the victims' re-prefill time
    (times cost_factor) is below the wait the head saves (module docstring). False: evict
    whenever the head is urgent (the paper)."""
    cost_factor: float = Field(1.0, ge=0)
    """Weight of the victims' re-prefill seconds against the head's saved seconds."""


def is_tight(cfg: TightClassConfig, request: Request) -> bool:
    """Whether `request` is dispatched directly (its TTFT SLO is within direct_max_ttft_s)."""
    limit = cfg.direct_max_ttft_s
    return limit is not None and request.slo.ttft_deadline_s <= limit


def choose_direct(
    request: Request, instances: Iterable[InstanceView], active_model_only: bool = False
) -> InstanceView | None:
    """The instance a tight request goes to: serving its model, model already active first,
    then the fewest outstanding (waiting + running + evicted) requests; ties to the first.
    None when no instance serves the model (or, with active_model_only, has it loaded)."""
    best: InstanceView | None = None
    best_key: tuple[int, int] | None = None
    for inst in instances:
        if not inst.serves(request.model):
            continue
        st = inst.status()
        if active_model_only and st.active_model != request.model:
            continue
        key = (0 if st.active_model == request.model else 1, st.waiting + st.running + st.evicted)
        if best_key is None or key < best_key:
            best, best_key = inst, key
    return best


def single_model(
    instances: Iterable[InstanceView], model: str, models_seen: Iterable[str]
) -> list[InstanceView]:
    """The instances that serve none of `models_seen` other than `model` (they never swap)."""
    others = [m for m in models_seen if m != model]
    return [i for i in instances if not any(i.serves(m) for m in others)]


def direct_candidates(
    cfg: TightClassConfig,
    request: Request,
    instances: Iterable[InstanceView],
    queue_models: Mapping[str, Iterable[str]],
    models_seen: Iterable[str],
) -> list[InstanceView]:
    """The instances `request` may be dispatched to directly: with single_model_only none that
    serves another of `models_seen`; with yield_to_swaps none whose virtual queue
    (`queue_models`: instance -> models of its groups) has a swap planned."""
    out = list(instances)
    if cfg.single_model_only:
        out = single_model(out, request.model, models_seen)
    if cfg.yield_to_swaps:
        busy = swap_pending(queue_models, request.model)
        out = [i for i in out if i.name not in busy]
    return out


def swap_pending(queues: Mapping[str, Iterable[str]], model: str) -> set[str]:
    """Instances whose virtual queue (instance -> models of its non-empty groups) holds a group
    of a model other than `model`: QLM has a swap planned there."""
    return {name for name, models in queues.items() if any(m != model for m in models)}


@dataclass(frozen=True, slots=True)
class EvictionVerdict:
    """Whether an eviction pays, with the figures it was decided on (seconds)."""

    pays: bool
    head_prefill_s: float
    victims_reprefill_s: float
    saved_s: float
    reason: str


def eviction_pays(
    cfg: EvictionCostConfig,
    profile: HardwareProfile | None,
    head_prompt_tokens: Sequence[int],
    victim_context_tokens: Sequence[float],
    slack_s: float,
    room_wait_s: float,
) -> EvictionVerdict:
    """Conditions (a) and (b) of the module docstring. head_prompt_tokens: prompts of the head's
    requests that would go in; victim_context_tokens: prompt + generated tokens of each victim
    (what its re-prefill recomputes); slack_s: the head's deadline minus now; room_wait_s: its
    predicted wait without eviction. Always pays when weigh_cost is off."""
    if not cfg.weigh_cost:
        return EvictionVerdict(True, 0.0, 0.0, room_wait_s, "cost not weighed")
    if profile is None:
        return EvictionVerdict(False, 0.0, 0.0, 0.0, "no profile: the cost cannot be weighed")
    head_s = sum(profile.prefill_time_s(1, t) for t in head_prompt_tokens)
    cost_s = sum(profile.prefill_time_s(1, t) for t in victim_context_tokens)
    saved_s = room_wait_s - head_s
    if head_s > slack_s:
        reason = f"head late anyway: prefill {head_s:.3f} s > slack {slack_s:.3f} s"
        return EvictionVerdict(False, head_s, cost_s, saved_s, reason)
    if cfg.cost_factor * cost_s >= saved_s:
        reason = f"re-prefill {cost_s:.3f} s x {cfg.cost_factor:g} >= saved {saved_s:.3f} s"
        return EvictionVerdict(False, head_s, cost_s, saved_s, reason)
    return EvictionVerdict(True, head_s, cost_s, saved_s, "pays")
