"""The simulator with a replica autoscaler: replicas start (after their start-up time) and stop
during a run, as an autoscaling policy (services/scheduler/core/autoscale/) decides.

Every `interval_s` a `ScaleTick` builds the model's `ModelLoad` (arrival rate over the last
interval and its trend, the engines' ongoing and waiting requests, Θ and P from the profile,
start-up = the profile's cold load time + `startup_overhead_s`) and asks the policy for a count.
- Scale-up: a replica is started; it holds its GPU from then on but serves only after start-up
  (a `ReplicaReady` event adds it to the instances the router sees).
- Scale-down: starting replicas are cancelled first, then the ready replica holding the least
  work stops taking requests, finishes what it holds (draining) and is released.
Replica-hours count every replica from its start to its release (or the run's end).
Only routing stacks are supported: a queueing policy (qlm) keeps per-instance queues and state
that a removed instance would strand.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.replica.core.sequence import Sequence as Seq
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.registry import create_scaling_policy
from services.scheduler.core.autoscale.signal import ModelLoad
from services.scheduler.core.autoscale.tracker import LoadTracker
from services.scheduler.core.global_policy import RoutingPolicy
from services.scheduler.core.qlm.rwt import InstanceRates
from shared.domain import Request
from shared.metrics.records import InstanceStats
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.events import Event
from slomesh.sim.instance import SimInstance
from slomesh.sim.simulator import Simulator
from slomesh.stacks import StackConfig

RATE_WINDOW_S = 30.0
"""Arrivals counted for the rate (Serve's look-back period)."""
TICK_ORDER = 3
"""After step ends, arrivals and schedules at the same instant."""


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    time_s: float
    replicas_from: int
    replicas_to: int
    reason: str


@dataclass(slots=True)
class ScalingLog:
    """What the autoscaler did in one run."""

    events: list[ScaleEvent] = field(default_factory=list)
    lifetimes: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    """Replica -> (started, released); released None while it lives."""
    timeline: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, ready, starting) at every tick."""

    def replica_hours(self, end_s: float) -> float:
        return sum(((r if r is not None else end_s) - s) for s, r in self.lifetimes.values()) / 3600


@dataclass(slots=True)
class ScaleTick:
    time_s: float
    order = TICK_ORDER

    def handle(self, sim: AutoscaledSimulator) -> list[Event]:
        return sim.tick(self.time_s)


@dataclass(slots=True)
class ReplicaReady:
    time_s: float
    instance: SimInstance
    order = TICK_ORDER

    def handle(self, sim: AutoscaledSimulator) -> list[Event]:
        sim.ready(self.instance, self.time_s)
        return []


class AutoscaledSimulator(Simulator):
    def __init__(
        self,
        cluster: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        autoscale: AutoscaleConfig,
        initial_replicas: int,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        if len(cluster.instances) != 1 or len(cluster.instances[0].models) != 1:
            raise ValueError("autoscaled runs need one instance kind serving one model")
        super().__init__(cluster.with_instances(initial_replicas), stack, requests, progress)
        if not isinstance(self.global_policy, RoutingPolicy):
            raise ValueError(
                f"stack '{stack.name}' queues requests in the scheduler; autoscaled runs support "
                "routing stacks only (e.g. edf, vllm-fcfs)"
            )
        self.cfg = autoscale
        self.policy = create_scaling_policy(autoscale)
        self.model = cluster.instances[0].models[0]
        self._template = self.instances[0]
        self._engine_config = self._template.core.config
        self._profiles = dict(self._template.core.tiers.profiles)
        profile = self._profiles[self.model]
        self.startup_s = profile.weight_bytes / profile.cold_load_bytes_s
        self.startup_s += autoscale.startup_overhead_s
        self.log = ScalingLog()
        self.starting: list[SimInstance] = []
        self.draining: list[SimInstance] = []
        self.everyone: list[SimInstance] = list(self.instances)
        for inst in self.instances:
            self.log.lifetimes[inst.name] = (0.0, None)
        self._arrival_times = [r.arrival_s for r in self.requests]
        self._fed = 0
        self._input_sum = 0
        self.tracker = LoadTracker(self.model, RATE_WINDOW_S, 256.0)
        self._push(ScaleTick(autoscale.interval_s))  # type: ignore[arg-type]

    # ---- hooks -------------------------------------------------------------------------------
    def record_finish(self, seq: Seq, instance: str) -> None:
        self.tracker.finished(seq.num_output_tokens)
        super().record_finish(seq, instance)

    def ready(self, inst: SimInstance, now_s: float) -> None:
        if inst in self.starting:
            self.starting.remove(inst)
            self.instances.append(inst)

    def tick(self, now_s: float) -> list[Event]:
        self._retire(now_s)
        load = self._load(now_s)
        decision = self.policy.decide(load)
        self.log.timeline.append((now_s, load.ready_replicas, load.starting_replicas))
        if decision.replicas != load.replicas:
            self.log.events.append(
                ScaleEvent(now_s, load.replicas, decision.replicas, decision.reason)
            )
            self._scale(decision.replicas - load.replicas, now_s)
        done = self._fed >= len(self.requests) and not any(
            i.core.has_work for i in self.instances + self.draining
        )
        if done:
            for inst in self.instances + self.starting:
                self._release(inst, now_s)
            self.starting.clear()
            return []
        return [ScaleTick(now_s + self.cfg.interval_s)]  # type: ignore[list-item]

    # ---- internals ---------------------------------------------------------------------------
    def _load(self, now_s: float) -> ModelLoad:
        upto = bisect.bisect_right(self._arrival_times, now_s)
        for r in self.requests[self._fed : upto]:
            self.tracker.arrival(r.arrival_s)
            self._input_sum += r.input_tokens
        self._fed = upto
        mean_in = self._input_sum / upto if upto else 512.0
        items = [w for i in self.instances + self.draining for w in i.work_items()]
        slacks = [w.ttft_deadline_abs_s - now_s for w in items if not w.running]
        rates = InstanceRates.from_profile(
            self._profiles[self.model],
            mean_in,
            self.tracker.mean_output_tokens,
            max_num_seqs=self._engine_config.max_num_seqs,
        )
        return self.tracker.snapshot(
            now_s,
            ready=len(self.instances),
            starting=len(self.starting),
            ongoing=float(len(items)),
            queue_slacks_s=slacks,
            replica_tokens_s=rates.theta_tok_s,
            prefill_s=rates.prefill_s,
            startup_s=self.startup_s,
        )

    def _scale(self, delta: int, now_s: float) -> None:
        for _ in range(delta):
            inst = SimInstance(
                f"i{len(self.everyone)}-{self._template.gpu}",
                self._template.gpu,
                self._profiles,
                self._engine_config,
                self.model,
            )
            self.add_instance(inst)
            self.everyone.append(inst)
            self.starting.append(inst)
            self.log.lifetimes[inst.name] = (now_s, None)
            self._push(ReplicaReady(now_s + self.startup_s, inst))  # type: ignore[arg-type]
        for _ in range(-delta):
            if self.starting:
                self._release(self.starting.pop(), now_s)
                continue
            if len(self.instances) <= 1:
                break
            inst = min(self.instances, key=lambda i: len(i.work_items()))
            self.instances.remove(inst)
            self.draining.append(inst)
        self._retire(now_s)

    def _retire(self, now_s: float) -> None:
        for inst in list(self.draining):
            if not inst.core.has_work and inst.in_flight is None:
                self.draining.remove(inst)
                self._release(inst, now_s)

    def _release(self, inst: SimInstance, now_s: float) -> None:
        start, released = self.log.lifetimes[inst.name]
        if released is None:
            self.log.lifetimes[inst.name] = (start, now_s)

    def _stats(self, start: float, end: float) -> list[InstanceStats]:
        live = self.instances
        self.instances = self.everyone
        try:
            return super()._stats(start, end)
        finally:
            self.instances = live
