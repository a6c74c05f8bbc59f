"""Model loads that share one host: engine restarts at once slow each other down.

On a small host every replica's engine runs on the same CPUs. A model swap there is an engine
restart (a process stops, another starts, loads its weights and warms up), and two replicas
restarting at once share the cores: each takes longer than the same swap alone. The simulated
engine charges a load its profile's time (`ModelTiers.load_time_s`); with a slowdown set
(`ClusterSpec.concurrent_load_slowdown`) the simulator runs the loads of all its instances as
one processor-shared host: a load's profiled time is its work, and while k loads run at once
each does its work at 1 / (1 + slowdown x (k - 1)) of its own speed. Every time a load starts
or ends the others' ends move (later when one joins, earlier when one leaves); the simulator
reschedules their step ends (slomesh/sim/events.py drops the stale one).

Pure bookkeeping on the simulator's clock: no engine state, no time read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.replica.core.outputs import StepPlan

if TYPE_CHECKING:
    from slomesh.sim.instance import SimInstance


@dataclass
class _Load:
    instance: SimInstance
    plan: StepPlan
    work_s: float
    """Solo seconds of the load still to do."""


class HostLoads:
    def __init__(self, slowdown: float) -> None:
        if slowdown < 0:
            raise ValueError(f"concurrent_load_slowdown must be >= 0, got {slowdown}")
        self.slowdown = slowdown
        self._loads: dict[str, _Load] = {}
        self._t = 0.0

    def speed(self, loads: int) -> float:
        """The share of its solo speed each of `loads` loads at once gets."""
        return 1.0 / (1.0 + self.slowdown * max(0, loads - 1))

    def start(self, instance: SimInstance, plan: StepPlan) -> list[tuple[SimInstance, StepPlan]]:
        """`instance` starts the load `plan` (timed alone) at `plan.start_s`; the loads whose
        end moved, this one included when others run (their step ends are due again)."""
        self._advance(plan.start_s)
        self._loads[instance.name] = _Load(instance, plan, plan.duration_s)
        return self._retime(plan.start_s)

    def end(self, instance: SimInstance, now_s: float) -> list[tuple[SimInstance, StepPlan]]:
        """`instance`'s load ended at `now_s`; the other loads whose end moved."""
        self._advance(now_s)
        self._loads.pop(instance.name, None)
        return self._retime(now_s)

    def _advance(self, now_s: float) -> None:
        done = (now_s - self._t) * self.speed(len(self._loads))
        for load in self._loads.values():
            load.work_s = max(0.0, load.work_s - done)
        self._t = max(self._t, now_s)

    def _retime(self, now_s: float) -> list[tuple[SimInstance, StepPlan]]:
        speed = self.speed(len(self._loads))
        moved = []
        for load in self._loads.values():
            plan = load.plan
            duration_s = now_s - plan.start_s + load.work_s / speed
            if duration_s != plan.duration_s:
                load.instance.core.busy_s += duration_s - plan.duration_s
                plan.duration_s = duration_s
                moved.append((load.instance, plan))
        return moved
