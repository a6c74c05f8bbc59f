"""Scheduler shards in the simulator: the shard split and each shard's decision cost.

`ShardedSimulator` runs K schedulers (the live scheduler's admission and cluster core,
slomesh/sim/scheduler.py), each with its own copy of the stack's global policy over the
instances it owns (`divide_replicas`,
shared/policy/shards.py, the live rule); the simulator's one applier carries out every
core's decisions. An arrival goes
to its shard by the ingress's rule (`shard_order` of its id, weighted by the shard's instances
of its model), and the policy decides after the shard's CPU has done it: each shard is one
server that spends `admit_cost_ms` per admission, `report_cost_ms` per completion report and,
every `exchange_interval_ms`, `exchange_cost_ms` per peer for the usage exchange. A decision
waits for the work queued on its shard before it (the admission delay the live scheduler's
event loop adds). The shards' tenant counters are exchanged at every interval with the live
code (services/scheduler/shard_usage.py), so fairness across shards is simulated with the
staleness of one interval.

With one shard and zero costs this is the plain simulator (same decisions, same records).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core import events as cev
from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from services.scheduler.shard_usage import UsageLedger
from shared.domain import Request
from shared.policy.shards import divide_replicas, shard_order
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.events import EventOrder
from slomesh.sim.scheduler import SimAdmissionConfig, SimScheduler
from slomesh.sim.simulator import Simulator, admission_ttft_guard
from slomesh.stacks import StackConfig


class ShardModel(BaseModel):
    """How many scheduler shards, and what their work costs (CPU per event, measured live)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    shards: int = Field(1, ge=1)
    """Scheduler shards dividing the instances."""
    admit_cost_ms: float = Field(0.0, ge=0)
    """A shard's CPU per admission decision (Admit, or Place on a credit), milliseconds."""
    report_cost_ms: float = Field(0.0, ge=0)
    """A shard's CPU per completion report, milliseconds."""
    exchange_interval_ms: float = Field(200.0, gt=0)
    """How often each shard exchanges tenant usage with each peer, milliseconds."""
    exchange_cost_ms: float = Field(0.0, ge=0)
    """A shard's CPU per exchange with one peer (its call and its answer), milliseconds."""


@dataclass(slots=True)
class ShardDecision:
    """A shard decides on an arrival once its CPU gets to it."""

    time_s: float
    request: Request
    shard: int
    order = EventOrder.ARRIVAL

    def handle(self, sim: ShardedSimulator) -> list[object]:
        sim.admit_on(self.shard, self.request, self.time_s)
        return []


class ShardCpu:
    """Each shard as one server: the CPU it spends, when it is free, and the usage exchange
    (run with the live code at every interval: shard_usage.py and the VTC's `absorb`)."""

    def __init__(self, model: ShardModel, vtc: Callable[[int], VirtualTokenCounter | None]) -> None:
        self.model = model
        self._vtc = vtc
        self.busy_until = [0.0] * model.shards
        self.busy_s = [0.0] * model.shards
        """CPU seconds each shard spent."""
        self.admission_delays_s: list[float] = []
        """Per arrival: its decision time minus its arrival time."""
        self.max_staleness_s = 0.0
        """The oldest peer usage a decision was made with, seconds."""
        self._ledgers = [UsageLedger() for _ in range(model.shards)]
        self._next_exchange_s = 0.0
        self._last_exchange_s = 0.0

    def spend(self, shard: int, at_s: float, cost_s: float) -> float:
        """Queue `cost_s` of work on `shard` at `at_s`; when it is done."""
        done = max(at_s, self.busy_until[shard]) + cost_s
        self.busy_until[shard] = done
        self.busy_s[shard] += cost_s
        return done

    def catch_up(self, now_s: float) -> None:
        """Run the usage exchanges due up to `now_s` (each a CPU cost on every shard)."""
        k = self.model.shards
        if k < 2:
            return
        interval = self.model.exchange_interval_ms / 1e3
        while self._next_exchange_s <= now_s:
            t = self._next_exchange_s
            for s in range(k):
                self.spend(s, t, (k - 1) * self.model.exchange_cost_ms / 1e3)
            vtcs = [self._vtc(s) for s in range(k)]
            charged = [dict(v.charged) if v is not None else {} for v in vtcs]
            for s, vtc in enumerate(vtcs):
                for p in range(k):
                    if p == s:
                        continue
                    deltas = self._ledgers[s].merge(f"shard-{p}", "sim", t, charged[p])
                    if vtc is not None:
                        for tenant, delta in deltas.items():
                            vtc.absorb(tenant, delta)
            self._last_exchange_s = t
            self._next_exchange_s = t + interval

    def decided(self, now_s: float) -> None:
        """A decision at `now_s`: how old the peers' usage is."""
        if self.model.shards > 1:
            self.max_staleness_s = max(self.max_staleness_s, now_s - self._last_exchange_s)


class ShardedSimulator(Simulator):
    """The simulator with the scheduler split into `model.shards` shards, each the live
    scheduler's admission and cluster core (slomesh/sim/scheduler.py) over its own instances."""

    def __init__(
        self,
        cluster_spec: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        model: ShardModel,
        progress: Callable[[int], None] | None = None,
        admission: SimAdmissionConfig | None = None,
    ) -> None:
        super().__init__(cluster_spec, stack, requests, progress, admission=admission)
        self.model = model
        models = [s.models[0] for s in cluster_spec.instances for _ in range(s.count)]
        self._models = {i.name: m for i, m in zip(self.instances, models, strict=True)}
        names = [f"shard-{k}" for k in range(model.shards)]
        owned = divide_replicas(self._models.items(), names)
        self.subsets = [[i.name for i in self.instances if i.name in owned[n]] for n in names]
        self.owner = {name: k for k, sub in enumerate(self.subsets) for name in sub}
        self.schedulers = [self.scheduler]
        if model.shards > 1:
            self.schedulers = [
                SimScheduler(
                    stack.global_policy(simulated=True),
                    stack.name,
                    [i for i in self.instances if i.name in owned[n]],
                    self.admission,
                    admission_ttft_guard(stack.scorpio),
                )
                for n in names
            ]
        self.cores = [sched.admission.core for sched in self.schedulers]
        self.cpu = ShardCpu(model, self._vtc)

    def _vtc(self, shard: int) -> VirtualTokenCounter | None:
        selector = getattr(self.cores[shard].policy, "selector", None)
        return getattr(selector, "vtc", None)

    def decide(self, event: cev.ClusterEvent) -> None:
        """Arrivals go to their shard (the ingress's rule) and wait for its CPU; ticks go to
        every shard; other events to the shard owning their instance (a report also costs that
        shard CPU)."""
        now = event.now_s
        self.cpu.catch_up(now)
        if isinstance(event, cev.Arrival):
            request = event.request
            weights = {
                str(k): float(sum(self._models[n] == request.model for n in sub))
                for k, sub in enumerate(self.subsets)
            }
            shard = int(shard_order(request.request_id, weights)[0])
            done = self.cpu.spend(shard, now, self.model.admit_cost_ms / 1e3)
            self.cpu.admission_delays_s.append(done - now)
            if done <= now:
                self.admit_on(shard, request, now)
            else:
                self._push(ShardDecision(done, request, shard))  # type: ignore[arg-type]
            return
        name = getattr(event, "instance", None)
        targets = range(len(self.schedulers)) if name is None else [self.owner[name]]
        for shard in targets:
            if isinstance(event, cev.Finish):
                self.cpu.spend(shard, now, self.model.report_cost_ms / 1e3)
            self._on(shard, event)

    def admit_on(self, shard: int, request: Request, now_s: float) -> None:
        """Shard `shard` decides on `request` at `now_s`, over its instances still serving."""
        self.cpu.catch_up(now_s)
        self.cpu.decided(now_s)
        serving = {i.name for i in self.instances} & set(self.subsets[shard])
        self.schedulers[shard].serving(serving, now_s)
        self._on(shard, cev.Arrival(request, now_s=now_s))

    def _on(self, shard: int, event: cev.ClusterEvent) -> None:
        self.run_on(self.schedulers[shard], event)
