"""Simulator events. Each handler returns the events it causes (vidur-style).

Ties at one instant are broken by kind (step ends free resources before arrivals are placed, and
arrivals are placed before engines pick their next batch), then by insertion sequence. What the
cluster does is decided by the scheduler's cluster core: the events hand it cluster events
(services/scheduler/core/events.py) through `EventLoop.decide`, which applies its output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

from services.replica.core.outputs import StepKind, StepPlan
from services.replica.core.sequence import Sequence
from services.scheduler.core import events as cluster
from shared.domain import Request
from shared.domain.engine import SliceEntry
from slomesh.sim.host_loads import HostLoads
from slomesh.sim.host_speed import stretch

if TYPE_CHECKING:
    from slomesh.sim.instance import SimInstance


class EventLoop(Protocol):
    """What the events need from the loop that runs them (the Simulator, slomesh/sim/simulator.py,
    which imports this module: the events see it only through this interface)."""

    def next_arrival(self) -> list[Event]: ...

    def decide(self, event: cluster.ClusterEvent) -> None:
        """Hand the cluster core `event` and apply its decisions."""
        ...

    def scheduler_tick(self, now_s: float) -> None:
        """The scheduler's periodic tick."""
        ...

    def reject(self, request: Request, reason: str, now_s: float) -> None: ...

    def record_finish(self, seq: Sequence, instance: str) -> None: ...

    def probe(self, now_s: float) -> list[Event]:
        """The scheduler's Status probe of every instance; the next probe, while one is due."""
        ...

    def swap_ended(self, instance: SimInstance, now_s: float) -> None:
        """`instance` finished loading a model (a live replica pushes its state then)."""
        ...

    host_loads: HostLoads | None
    """The instances' model loads on one shared host (None: loads never slow each other)."""


class EventOrder(IntEnum):
    STEP_END = 0
    ARRIVAL = 1
    SCHEDULE = 2
    TICK = 3
    REPORT = 4


@dataclass(slots=True)
class Arrival:
    time_s: float
    request: Request
    order = EventOrder.ARRIVAL

    def handle(self, sim: EventLoop) -> list[Event]:
        sim.decide(cluster.Arrival(self.request, now_s=self.time_s))
        return sim.next_arrival()


@dataclass(slots=True)
class Schedule:
    time_s: float
    instance: SimInstance
    order = EventOrder.SCHEDULE

    def handle(self, sim: EventLoop) -> list[Event]:
        inst = self.instance
        inst.schedule_pending = False
        if inst.in_flight is not None:
            return []
        plan = inst.core.schedule(self.time_s)
        for seq, reason in plan.rejected:
            sim.reject(seq.request, reason, self.time_s)
            sim.decide(cluster.EngineReject(seq.request, inst.name, reason, now_s=self.time_s))
        if plan.kind is StepKind.IDLE:
            if plan.rejected:  # the engine's guard emptied its queue: with no step to end, the
                # policy hears of the idle engine here, or work it still holds waits forever
                sim.decide(cluster.StepEnd(inst.name, now_s=self.time_s))
            return []
        stretch(inst.core, plan, inst.speed)
        inst.in_flight = plan
        moved = []
        if sim.host_loads is not None and plan.kind is StepKind.LOAD_MODEL:
            moved = [(i, p) for i, p in sim.host_loads.start(inst, plan) if i is not inst]
        return [*(StepEnd(p.end_s, i, p) for i, p in moved), StepEnd(plan.end_s, inst, plan)]


@dataclass(slots=True)
class StepEnd:
    time_s: float
    instance: SimInstance
    plan: StepPlan
    order = EventOrder.STEP_END

    def handle(self, sim: EventLoop) -> list[Event]:
        inst = self.instance
        if inst.in_flight is not self.plan or self.time_s != self.plan.end_s:
            return []  # a load whose end moved (host_loads.py): its new end is due instead
        result = inst.core.update(self.plan)
        inst.in_flight = None
        moved = []  # loads on the host that speed up now this one ended (host_loads.py)
        if self.plan.kind is StepKind.LOAD_MODEL:
            sim.swap_ended(inst, self.time_s)
            if sim.host_loads is not None:
                moved = sim.host_loads.end(inst, self.time_s)
        for seq in result.finished:
            sim.record_finish(seq, inst.name)
        for seq in result.sliced:
            entry = SliceEntry(
                seq.request, seq.num_output_tokens, seq.first_token_s, seq.preemptions
            )
            sim.decide(cluster.SliceEnd(entry, inst.name, now_s=self.time_s))
        sim.decide(cluster.StepEnd(inst.name, now_s=self.time_s))
        inst.schedule_pending = True
        return [*(StepEnd(p.end_s, i, p) for i, p in moved), Schedule(self.time_s, inst)]


@dataclass(slots=True)
class Tick:
    """The scheduler's tick (services/scheduler/args.py tick_interval_ms), while work is queued."""

    time_s: float
    order = EventOrder.TICK

    def handle(self, sim: EventLoop) -> list[Event]:
        sim.scheduler_tick(self.time_s)
        return []


@dataclass(slots=True)
class Delivered:
    """A cluster event that reaches the scheduler late (a completion report under the live
    view, slomesh/sim/live_view.py)."""

    time_s: float
    event: cluster.ClusterEvent
    order = EventOrder.REPORT

    def handle(self, sim: EventLoop) -> list[Event]:
        sim.decide(self.event)
        return []


@dataclass(slots=True)
class Probe:
    """The scheduler's Status probe of every instance (the live view's TTFT guard reports)."""

    time_s: float
    order = EventOrder.REPORT

    def handle(self, sim: EventLoop) -> list[Event]:
        return sim.probe(self.time_s)


@dataclass(slots=True)
class Later:
    """A simulated shell's own timer: the ingress's outbox and its calls to the scheduler
    (slomesh/sim/leases.py)."""

    time_s: float
    fire: Callable[[float], None]
    order = EventOrder.REPORT

    def handle(self, sim: EventLoop) -> list[Event]:
        self.fire(self.time_s)
        return []


Event = Arrival | Schedule | StepEnd | Tick | Delivered | Probe | Later
