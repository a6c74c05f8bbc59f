"""Numbers the QLM policy needs about its virtual queues, from the RWT estimator (rwt.py).

For each virtual queue: the load of every group (size, μ_o, σ_o, max_o from its members'
predicted lengths), the instance's rates (Θ, P, d, ε from its hardware profile), and from those
the predicted start of every group and wait of every request (Eqs. 1-5). It also turns the
current state into the global scheduler's problem (solvers/problem.py): a GroupJob per group and a
QueueSlot per instance. Where an instance has no hardware profile (a live model outside the
catalogue) its rates come from `QLMConfig.fallback_output_tokens_s`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.groups import Grouper, RequestGroup
from services.scheduler.core.qlm.rwt import (
    GroupEstimate,
    GroupLoad,
    InstanceRates,
    RWTEstimator,
    z_for_percentile,
)
from services.scheduler.core.qlm.solvers.problem import GroupJob, QueueSlot
from services.scheduler.core.qlm.virtual_queues import VirtualQueues
from shared.domain import Request

_RATES_DRIFT = 0.25
"""Recompute an instance's cached rates when the mean lengths moved by more than this fraction."""


class QueueEstimator:
    def __init__(
        self,
        cfg: QLMConfig,
        grouper: Grouper,
        vqs: VirtualQueues,
        instances: Mapping[str, InstanceView],
    ) -> None:
        self.cfg = cfg
        self.grouper = grouper
        self.vqs = vqs
        self.instances = instances
        self.rwt = RWTEstimator(z_for_percentile(cfg.slo_percentile))
        self.rwt_mean = RWTEstimator(0.0)  # point estimates, scored against measured waits
        self._rates: dict[tuple[str, str], tuple[float, float, InstanceRates]] = {}
        self._by_lengths: dict[tuple[str, str, int, int], InstanceRates] = {}
        self._n = 0
        self._mean_in = 512.0
        self._mean_out = 256.0

    def observe_arrival(self, request: Request, mean_output_tokens: float) -> None:
        """Running means of input and predicted output lengths (they size Θ's batch B)."""
        self._n += 1
        k = 1.0 / min(self._n, 1000)
        self._mean_in += k * (request.input_tokens - self._mean_in)
        self._mean_out += k * (mean_output_tokens - self._mean_out)

    def rates(
        self,
        instance: str,
        model: str,
        mean_in: float | None = None,
        mean_out: float | None = None,
    ) -> InstanceRates:
        """Θ, P, d of `instance` serving `model` for a batch of the given mean lengths (default:
        the running means of all arrivals). Cached per 10% step of either length."""
        if mean_in is not None and mean_out is not None and mean_in > 0 and mean_out > 0:
            k = (instance, model, _step(mean_in), _step(mean_out))
            hit_l = self._by_lengths.get(k)
            if hit_l is None:
                hit_l = self._compute(instance, model, mean_in, mean_out)
                self._by_lengths[k] = hit_l
            return hit_l
        key = (instance, model)
        hit = self._rates.get(key)
        if hit is not None:
            i0, o0, r = hit
            if (
                abs(self._mean_in - i0) <= _RATES_DRIFT * i0
                and abs(self._mean_out - o0) <= _RATES_DRIFT * o0
            ):
                return r
        r = self._compute(instance, model, self._mean_in, self._mean_out)
        self._rates[key] = (self._mean_in, self._mean_out, r)
        return r

    def _compute(self, instance: str, model: str, mean_in: float, mean_out: float) -> InstanceRates:
        inst = self.instances[instance]
        try:
            profile = inst.profile(model)
        except ValueError:
            theta = self.cfg.fallback_output_tokens_s
            d = inst.max_num_seqs / theta  # a full batch yields one token per request per step
            r = InstanceRates(theta, prefill_s=d, decode_token_s=d, batch=inst.max_num_seqs)
        else:
            r = InstanceRates.from_profile(
                profile, mean_in, mean_out, max_num_seqs=inst.max_num_seqs
            )
        return r

    def _queue_rates(self, name: str, groups: list[RequestGroup]) -> dict[str, InstanceRates]:
        """Rates per model for the mix of lengths queued on `name`: a queue of long prompts
        runs at a lower Θ than one of short ones."""
        sums: dict[str, list[float]] = {}
        for g in groups:
            s = sums.setdefault(g.model, [0.0, 0.0, 0.0])
            s[0] += g.input_tokens_sum
            s[1] += g.output_tokens_mean_sum
            s[2] += g.size
        return {
            m: self.rates(name, m, s[0] / s[2], s[1] / s[2]) if s[2] else self.rates(name, m)
            for m, s in sums.items()
        }

    def _group_rates(self, name: str, g: RequestGroup) -> InstanceRates:
        if g.size == 0:
            return self.rates(name, g.model)
        return self.rates(
            name, g.model, g.input_tokens_sum / g.size, g.output_tokens_mean_sum / g.size
        )

    # ---- per queue ------------------------------------------------------------------------------
    def _load(self, g: RequestGroup) -> GroupLoad:
        mu, sigma, mx = g.output_stats()
        return GroupLoad(g.size, mu, sigma, mx, g.input_tokens_sum / max(1, g.size), g.model)

    def _ready_and_drain(self, name: str) -> tuple[float, float, str | None]:
        status = self.instances[name].status()
        model = status.active_model
        if model is None:
            return 0.0, 0.0, None
        r = self.rates(name, model)
        # drain before a swap: the tail (P + D) of a long request of the running batch
        drain = r.tail_s(int(2 * self._mean_out))
        return status.waiting * self._mean_out / r.theta_tok_s, drain, model

    def room_wait_s(self, name: str) -> float:
        """How long the next pulled request waits for a seat on a full instance without
        eviction: the engine's waiting requests and itself, one mean output each, at Θ
        (continuous batching frees a seat every E[O]/Θ seconds on average)."""
        status = self.instances[name].status()
        if status.active_model is None:
            return 0.0
        r = self.rates(name, status.active_model)
        return (status.waiting + 1) * self._mean_out / r.theta_tok_s

    def swap_costs(self, name: str, models: set[str] | None = None) -> dict[str, float]:
        """Seconds a transition to each model takes on `name` (default: the models of its
        queue): `transition_s` where a run of another model may precede it, its load time
        (0 for the active model) where the models hold one only; nothing when the swap LSO
        is off (the planner then ignores swaps)."""
        if not self.cfg.lso.swap:
            return {}
        if models is None:
            models = {self.grouper.group(g).model for g in self.vqs.order(name)}
        inst = self.instances[name]
        if len(models) < 2:  # no run of another model to come back from
            return {m: inst.load_time_s(m) for m in models}
        return {m: transition_s(inst, m) for m in models}

    def swap_lead_s(self, inst: InstanceView, group: RequestGroup) -> float:
        """From a swap decided on `inst` to `group` served there: the running batch's drain,
        the group's model's load time and the group's own service (the SLO quantile)."""
        drain = self._ready_and_drain(inst.name)[1]
        rates = self._group_rates(inst.name, group)
        return drain + inst.load_time_s(group.model) + self.rwt.service_s(self._load(group), rates)

    def estimates(self, name: str, point: bool = False) -> list[GroupEstimate]:
        """Every group's estimate on `name`'s queue; point=True: z = 0 (mean) instead of the
        SLO quantile."""
        groups = [self.grouper.group(g) for g in self.vqs.order(name)]
        ready, drain, active = self._ready_and_drain(name)
        rates = self._queue_rates(name, groups)
        loads = [self._load(g) for g in groups]
        rwt = self.rwt_mean if point else self.rwt
        return rwt.queue_estimates(loads, rates, ready, self.swap_costs(name), drain, active)

    def backlog_s(self, name: str, now_s: float) -> float:
        ests = self.estimates(name)
        if not ests:
            return self._ready_and_drain(name)[0]
        return ests[-1].start_s + ests[-1].service_s

    def imbalanced(self, now_s: float) -> bool:
        """Groups grow after placement, so queues drift apart; re-plan (which balances) when
        the predicted drain times differ by more than `rebalance_fraction` of the longest."""
        backlogs = [self.backlog_s(n, now_s) for n in self.vqs.names()]
        if len(backlogs) < 2:
            return False
        longest = max(backlogs)
        if longest < 10 * self.cfg.check_interval_s:
            return False
        return longest - min(backlogs) > self.cfg.rebalance_fraction * longest

    def request_wait_s(
        self, name: str, group: RequestGroup, request_id: str, now_s: float, point: bool = False
    ) -> float:
        """Predicted wait from arrival to start of service (Eqs. 2-3 at the request's position)."""
        ids = self.vqs.order(name)
        est = self.estimates(name, point)[ids.index(group.group_id)]
        rwt = self.rwt_mean if point else self.rwt
        queued = [self.grouper.group(g) for g in ids]
        waits = rwt.request_waits_in_group(
            self._load(group),
            est.start_s,
            self._queue_rates(name, queued)[group.model],
            ahead_mean_tokens=est.ahead_mean_tokens,
            ahead_var_tokens=est.ahead_var_tokens,
        )
        pos = group.position_of(request_id)
        return now_s - group.arrival_of(request_id) + waits[min(pos, len(waits) - 1)]

    def violating_groups(self, now_s: float) -> list[str]:
        late = []
        for name in self.vqs.names():
            for gid, est in zip(self.vqs.order(name), self.estimates(name), strict=True):
                if est.start_s > self.grouper.group(gid).earliest_deadline_abs_s - now_s:
                    late.append(gid)
        return late

    # ---- the global scheduler's problem ---------------------------------------------------
    def problem(
        self, now_s: float, eligible: Callable[[RequestGroup], list[str]]
    ) -> tuple[list[GroupJob], list[QueueSlot]]:
        slots = []
        for name in self.vqs.names():
            ready, drain, active = self._ready_and_drain(name)
            swap = self.swap_costs(name, self._models())
            slots.append(QueueSlot(name, active, ready, drain if self.cfg.lso.swap else 0.0, swap))
        jobs = []
        for g in self.grouper.groups():
            if g.size == 0:
                continue
            load = self._load(g)
            service = {q: self.rwt.service_s(load, self._group_rates(q, g)) for q in eligible(g)}
            if service:
                deadline = g.earliest_deadline_abs_s - now_s
                jobs.append(GroupJob(g.group_id, g.model, g.size, deadline, service))
        return jobs, slots

    def _models(self) -> set[str]:
        return {g.model for g in self.grouper.groups() if g.size > 0}


def transition_s(inst: InstanceView, model: str) -> float:
    """Seconds `inst` takes to serve `model` again after a run of another model: the planner
    charges a swap only where a run follows one of another model (rwt.py `queue_estimates`,
    the solvers' transitions), so even the model `inst` has active (or is loading: its
    load_time_s is then 0) costs its way back from host memory, where the swap away leaves it;
    any other model its load time from its tier now. 0 only for a model with no profile."""
    t = inst.load_time_s(model)
    if t > 0:
        return t
    try:
        p = inst.profile(model)
    except ValueError:  # no profile (a live model outside the catalogue): nothing known
        return t
    return p.weight_bytes / p.swap_bytes_s


def _step(tokens: float) -> int:
    """Index of the 10% step `tokens` falls in (log scale): the rates cache key."""
    return round(math.log(tokens) / math.log(1.1))
