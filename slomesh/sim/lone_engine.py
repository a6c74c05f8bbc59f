"""One simulated engine on its own, stepped on a virtual clock (no cluster, no event queue).

A SimEngineCore serving a single model (with the planner its EngineConfig asks for) and the time
it has reached. Each step runs back to back: the clock moves to the step's end, exactly the
duration the HardwareProfile gives (times the factor of a `HostSpeed`, when given one, at the
step's start: a host whose speed varies, slomesh/sim/host_speed.py). Like vLLM's engine loop,
requests that arrive while a step runs join at the step's end, and an idle engine jumps to the
next arrival.

Three drivers share it: the engine check (slomesh/sim/engine_check.py), the trace replay of the
fidelity check (slomesh/sim/replay.py) and the profiler's simulated sweep engine
(slomesh/sim/sweep_engine.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind, StepPlan, StepResult
from services.replica.core.planner_factory import make_planner
from services.replica.core.sequence import Sequence
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig
from slomesh.sim.host_speed import HostSpeed, stretch


class EngineStalled(RuntimeError):
    """The engine has work left but plans nothing, and no arrival is due to change that."""


class LoneEngine:
    """A SimEngineCore serving `profile.model` (GPU-active from the start) on virtual time."""

    def __init__(
        self,
        name: str,
        profile: HardwareProfile,
        config: EngineConfig,
        speed: HostSpeed | None = None,
    ) -> None:
        self.speed = speed
        profiles = {profile.model: profile}
        self.core = SimEngineCore(
            name, profiles, config, make_planner(config, profiles), profile.model
        )
        self.now_s = 0.0

    def add(self, request: Request) -> Sequence:
        """Queue `request` as arrived at its arrival time."""
        return self.core.add_request(request, request.arrival_s)

    def step(self, observe: Callable[[StepPlan], None] | None = None) -> StepResult:
        """Run the next step to its end; EngineStalled if the engine plans nothing.

        `observe(plan)` sees the plan before it is applied (its chunks' sequences still hold
        their state from before the step).
        """
        result = self._advance(observe)
        if result is None:
            raise EngineStalled(f"{self.core.name}: idle at t={self.now_s:.3f}s")
        return result

    def run(
        self,
        requests: Iterable[Request],
        observe: Callable[[StepPlan], None] | None = None,
    ) -> list[Sequence]:
        """Serve `requests` (fed at their arrival times) until all are done; their sequences in
        arrival order. EngineStalled if the engine idles with work queued and no arrival due."""
        pending = sorted(requests, key=lambda r: r.arrival_s)
        seqs: list[Sequence] = []
        i = 0
        while i < len(pending) or self.core.has_work:
            while i < len(pending) and pending[i].arrival_s <= self.now_s:
                seqs.append(self.add(pending[i]))
                i += 1
            if self._advance(observe) is not None:
                continue
            if i >= len(pending):
                raise EngineStalled(
                    f"{self.core.name}: stalled at t={self.now_s:.3f}s with work queued"
                )
            self.now_s = max(self.now_s, pending[i].arrival_s)
        return seqs

    def _advance(self, observe: Callable[[StepPlan], None] | None) -> StepResult | None:
        """Plan, observe and apply one step, moving the clock to its end; None if idle."""
        plan = self.core.schedule(self.now_s)
        if plan.kind is StepKind.IDLE:
            return None
        stretch(self.core, plan, self.speed)
        if observe is not None:
            observe(plan)
        result = self.core.update(plan)
        self.now_s = plan.end_s
        return result
