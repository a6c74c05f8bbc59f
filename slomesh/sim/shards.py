"""Scheduler shards in the simulator: the shard split and each shard's decision cost.

`ShardedSimulator` runs K copies of the stack's global policy, one per shard, each over the
instances it owns (`divide_replicas`, shared/policy/shards.py, the live rule). An arrival goes
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

from services.scheduler.core.cluster_view import InstanceHandle, Rejector
from services.scheduler.core.fairness.vtc import VirtualTokenCounter
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.shard_usage import UsageLedger
from shared.domain import Request
from shared.domain.engine import SliceEntry
from shared.policy.shards import divide_replicas, shard_order
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.events import EventOrder
from slomesh.sim.simulator import Simulator
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
        sim.sharded.decide(self.request, self.shard, self.time_s)
        return []


class ShardedPolicy(GlobalPolicy):
    """The simulator's one global policy, fanning out to the shards' policies."""

    def __init__(
        self,
        model: ShardModel,
        make_policy: Callable[[], GlobalPolicy],
        instances: Sequence[InstanceHandle],
        models: Sequence[str],
        defer: Callable[[ShardDecision], None],
    ) -> None:
        self.model = model
        names = [f"shard-{i}" for i in range(model.shards)]
        pairs = [(i.name, m) for i, m in zip(instances, models, strict=True)]
        owned = divide_replicas(pairs, names)
        self.policies = [make_policy() for _ in names]
        self.subsets = [[i for i in instances if i.name in owned[n]] for n in names]
        self.owner = {i.name: k for k, sub in enumerate(self.subsets) for i in sub}
        self._models = {i.name: m for i, m in zip(instances, models, strict=True)}
        self._defer = defer
        self.busy_until = [0.0] * model.shards
        self.busy_s = [0.0] * model.shards
        """CPU seconds each shard spent."""
        self.admission_delays_s: list[float] = []
        """Per arrival: its decision time minus its arrival time."""
        self.max_staleness_s = 0.0
        """The oldest peer usage a decision was made with, seconds."""
        self._ledgers = [UsageLedger() for _ in names]
        self._next_exchange_s = 0.0
        self._last_exchange_s = 0.0
        self._rejector: Rejector | None = None

    # ---- the shards' CPU ------------------------------------------------------------------
    def _spend(self, shard: int, at_s: float, cost_s: float) -> float:
        done = max(at_s, self.busy_until[shard]) + cost_s
        self.busy_until[shard] = done
        self.busy_s[shard] += cost_s
        return done

    def _catch_up(self, now_s: float) -> None:
        """Run the usage exchanges due up to `now_s` (each a CPU cost on every shard)."""
        k = self.model.shards
        if k < 2:
            return
        interval = self.model.exchange_interval_ms / 1e3
        while self._next_exchange_s <= now_s:
            t = self._next_exchange_s
            for s in range(k):
                self._spend(s, t, (k - 1) * self.model.exchange_cost_ms / 1e3)
            charged = [dict(v.charged) if v is not None else {} for v in map(self._vtc, range(k))]
            for s in range(k):
                vtc = self._vtc(s)
                for p in range(k):
                    if p == s:
                        continue
                    deltas = self._ledgers[s].merge(f"shard-{p}", "sim", t, charged[p])
                    if vtc is not None:
                        for tenant, delta in deltas.items():
                            vtc.absorb(tenant, delta)
            self._last_exchange_s = t
            self._next_exchange_s = t + interval

    def _vtc(self, shard: int) -> VirtualTokenCounter | None:
        selector = getattr(self.policies[shard], "selector", None)
        return getattr(selector, "vtc", None)

    # ---- the policy hooks -----------------------------------------------------------------
    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceHandle],
        rejector: Rejector,
        now_s: float,
    ) -> None:
        self._rejector = rejector
        self._catch_up(now_s)
        weights = {
            str(k): float(sum(self._models[i.name] == request.model for i in sub))
            for k, sub in enumerate(self.subsets)
        }
        shard = int(shard_order(request.request_id, weights)[0])
        done = self._spend(shard, now_s, self.model.admit_cost_ms / 1e3)
        self.admission_delays_s.append(done - now_s)
        if done <= now_s:
            self.decide(request, shard, now_s)
        else:
            self._defer(ShardDecision(done, request, shard))

    def decide(self, request: Request, shard: int, now_s: float) -> None:
        self._catch_up(now_s)
        if self.model.shards > 1:
            self.max_staleness_s = max(self.max_staleness_s, now_s - self._last_exchange_s)
        assert self._rejector is not None
        self.policies[shard].on_arrival(request, self.subsets[shard], self._rejector, now_s)

    def on_step_end(self, instance: InstanceHandle, now_s: float) -> None:
        self.policies[self.owner[instance.name]].on_step_end(instance, now_s)

    def on_finish(self, request: Request, instance: str, output_tokens: int, now_s: float) -> None:
        shard = self.owner[instance]
        self._catch_up(now_s)
        self._spend(shard, now_s, self.model.report_cost_ms / 1e3)
        self.policies[shard].on_finish(request, instance, output_tokens, now_s)

    def on_engine_reject(self, request: Request, instance: str, reason: str, now_s: float) -> None:
        self.policies[self.owner[instance]].on_engine_reject(request, instance, reason, now_s)

    def on_slice_end(self, entry: SliceEntry, instance: str, now_s: float) -> None:
        self.policies[self.owner[instance]].on_slice_end(entry, instance, now_s)

    def on_instance_lost(self, instance: str, now_s: float) -> None:
        self.policies[self.owner[instance]].on_instance_lost(instance, now_s)


class ShardedSimulator(Simulator):
    """The simulator with the stack's global policy split into `model.shards` shards."""

    def __init__(
        self,
        cluster: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        model: ShardModel,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__(cluster, stack, requests, progress)
        models = [s.models[0] for s in cluster.instances for _ in range(s.count)]
        self.sharded = ShardedPolicy(
            model,
            lambda: stack.global_policy(simulated=True),
            self.instances,
            models,
            lambda ev: self._push(ev),  # type: ignore[arg-type]
        )
        self.global_policy = self.sharded
