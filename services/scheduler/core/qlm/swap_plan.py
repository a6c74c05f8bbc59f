"""When an instance swaps models (QLM's swap operation, a `ModelSwap` decision of the policy).

QLM pulls its virtual queue's head group whatever its model, so the instance swaps as soon as a
group of another model heads the queue. Where a swap costs tens of seconds (an engine restart
on a CPU replica) and the queue interleaves models (a tight class on the active model, a loose
one on a model loaded nowhere), that swaps back and forth on every lull: each swap serves a few
requests and delays the next ones of the model it left.

With `defer` on, an instance keeps the model it has (or was last swapped to) while the queued
groups of other models can still wait: a group of another model is served only once it is
*due*, when its slack has shrunk to what the swap needs before the group can start
(`lead_s`: the drain of the running batch + the model's load time + the group's own service +
`margin_s`). By then every request of that model queued so far rides the one swap, and the
instance serves the model's queued groups (`planned`) until a group of another model is due in
turn. The swap is decided only once the engine holds no waiting request of the old model, so
the requests placed before it finish on the model they were placed for and none waits on the
other side of two swaps. Off: QLM's order (the head group's model, at once).

A swap is deferred only when its round trip is dear next to the tightest TTFT SLO seen for the
displaced model (`defer_min_slo_fraction`): one taken at once costs that model's next requests
the round trip. Where swaps take seconds against minutes of SLO (a GPU swap from host memory),
deferring gains nothing and holds groups, and the engines with them, idle until due.

With `keep_sole_models`, a group is neither placed (while another instance can take it) nor
stolen where its swap would displace a model that no other instance serves for longer than that
model's tightest TTFT SLO (the round trip from host memory, as repeated swaps run): the
displaced model's next requests would miss whatever the order, and the instance that takes
them has to swap in turn (two replicas chasing each other's models).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.qlm.groups import RequestGroup
from shared.domain import Request


class SwapPlanConfig(BaseModel):
    """When the policy swaps an instance to the model of a queued group (module docstring)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    defer: bool = False
    """Serve a group of a model other than the instance's only once it is due (its slack down
    to the swap's lead time); the swap then serves every queued group of that model. Off: the
    head group's model is swapped to as soon as it heads the queue (QLM's pull order)."""
    defer_min_slo_fraction: float = Field(0.5, ge=0)
    """Defer only a swap whose round trip (load the group's model, then the planned one back)
    takes at least this fraction of the tightest TTFT SLO seen for the planned model: a cheaper
    one does not put that model's next requests at risk, so it is taken in QLM's order (a GPU
    swap from host memory takes seconds; an engine restart on a CPU replica tens of them). 0:
    defer every swap."""
    keep_sole_models: bool = False
    """Place a group (while another instance can take it) and steal one only where its swap
    leaves no model served by no instance for longer than that model's tightest TTFT SLO."""
    learn_requests: int = Field(0, ge=0)
    """A model's tightest TTFT SLO is the tightest of every model's until this many of its
    own requests have arrived (a model seen only in a loose class so far may have tight
    requests still to come); 0: its own from the first request."""
    margin_s: float = Field(5.0, ge=0)
    """Slack kept beyond the lead time (seconds): the swap is decided this much before the group
    would otherwise start too late."""


LeadTime = Callable[[InstanceView, RequestGroup], float]
"""Seconds from deciding a swap on an instance to the group's first request starting there."""


class SwapPlan:
    def __init__(
        self,
        cfg: SwapPlanConfig,
        lead_s: LeadTime,
        instances: Mapping[str, InstanceView] | None = None,
    ) -> None:
        self.cfg = cfg
        self.lead_s = lead_s
        self.instances: Mapping[str, InstanceView] = instances if instances is not None else {}
        """The cluster's instances (the policy's live mapping)."""
        self._planned: dict[str, str] = {}
        self._tightest_s: dict[str, float] = {}
        """The tightest TTFT SLO of the requests seen, per model (seconds)."""
        self._seen: dict[str, int] = {}
        """Requests seen per model."""
        self.swaps = 0
        """ModelSwap decisions made."""

    def planned(self, inst: InstanceView) -> str | None:
        """The model `inst` serves once its decided swaps are done (its active one if none)."""
        active = inst.status().active_model
        planned = self._planned.get(inst.name)
        if planned is not None and planned == active:  # the swap is done
            del self._planned[inst.name]
        return planned or active

    def observe(self, request: Request) -> None:
        """An arrival: its model's tightest TTFT SLO so far."""
        seen = self._tightest_s.get(request.model, math.inf)
        self._tightest_s[request.model] = min(seen, request.slo.ttft_deadline_s)
        self._seen[request.model] = self._seen.get(request.model, 0) + 1

    def tightest_s(self, model: str, default: float) -> float:
        """The tightest TTFT SLO that counts for `model` (learn_requests), `default` if unseen."""
        own = self._tightest_s.get(model, default)
        if self._seen.get(model, 0) >= self.cfg.learn_requests:
            return own
        return min(own, *self._tightest_s.values()) if self._tightest_s else own

    def _round_trip_s(
        self, inst: InstanceView, group: RequestGroup, model: str, warm: bool = False
    ) -> float:
        """Seconds `inst` spends swapping from `model` to `group`'s model and back (warm: both
        ways from host memory, as every swap after the first)."""
        there = inst.load_time_s(group.model)
        try:  # back: from host memory, where the swap leaves `model`
            p = inst.profile(model)
            back = p.weight_bytes / p.swap_bytes_s
            if warm:
                g = inst.profile(group.model)
                there = g.weight_bytes / g.swap_bytes_s
        except ValueError:  # no profile (a live replica): as long as the way there
            back = there
        return there + back

    def deferred(self, inst: InstanceView, group: RequestGroup, model: str) -> bool:
        """Whether `inst`, planned on `model`, holds back `group` (of another model) until due."""
        tightest = self.tightest_s(model, 0.0)
        return self._round_trip_s(inst, group, model) >= self.cfg.defer_min_slo_fraction * tightest

    def displaces(self, inst: InstanceView, group: RequestGroup) -> bool:
        """Whether serving `group` on `inst` leaves `inst`'s planned model on no instance for
        longer than that model's tightest TTFT SLO seen (keep_sole_models; False when off)."""
        model = self.planned(inst)
        if not self.cfg.keep_sole_models or model is None or model == group.model:
            return False
        if any(self.planned(o) == model for o in self.instances.values() if o is not inst):
            return False
        tightest = self.tightest_s(model, math.inf)
        return self._round_trip_s(inst, group, model, warm=True) >= tightest

    def forget(self, instance: str) -> None:
        self._planned.pop(instance, None)

    def due(self, inst: InstanceView, group: RequestGroup, now_s: float) -> bool:
        """Whether `group` must start its swap now on `inst` to meet its earliest deadline."""
        slack = group.earliest_deadline_abs_s - now_s
        return slack <= self.lead_s(inst, group) + self.cfg.margin_s

    def servable(
        self, inst: InstanceView, groups: list[RequestGroup], now_s: float
    ) -> list[RequestGroup]:
        """The groups `inst` may serve next: those of its planned model, and with `defer` off
        or once due, those of another model."""
        model = self.planned(inst)
        if not self.cfg.defer or model is None:
            return groups
        return [
            g
            for g in groups
            if g.model == model or not self.deferred(inst, g, model) or self.due(inst, g, now_s)
        ]

    def hosts(self, group: RequestGroup) -> list[str]:
        """The instances serving `group`'s model that take it without displacing a sole model
        (`displaces`), or all those serving it when none can."""
        names = [n for n, i in self.instances.items() if i.serves(group.model)]
        keep = [n for n in names if not self.displaces(self.instances[n], group)]
        return keep or names

    def placement_cost_s(self, inst: InstanceView, group: RequestGroup) -> float:
        """What queueing `group` on `inst` adds for the swap it needs there (with `defer`: the
        model's load time unless `inst` has or is swapping to the group's model; else 0)."""
        if not self.cfg.defer or self.planned(inst) == group.model:
            return 0.0
        return inst.load_time_s(group.model)

    def warm_next(self, inst: InstanceView, models: list[str], out: Decisions) -> None:
        """Keep the next models after the head's (those of `inst`'s queue, in order) warm in
        host memory (QLM §5)."""
        for m in list(dict.fromkeys(models))[1:3]:
            out.prewarm(inst, m)

    def ready(self, inst: InstanceView, group: RequestGroup, out: Decisions) -> bool:
        """Whether `group`'s requests may be placed on `inst` now; decides the swap when its
        model is not the planned one (and, with `defer`, only once the engine holds no waiting
        request of the old model: those run first)."""
        model = self.planned(inst)
        if group.model == model or model is None:
            return True
        if self.cfg.defer and inst.status().waiting > 0:
            return False
        out.swap(inst, group.model)
        self._planned[inst.name] = group.model
        self.swaps += 1
        return True
