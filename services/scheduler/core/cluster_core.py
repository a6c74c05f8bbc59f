"""The cluster scheduler core: events in, decisions out (vLLM v1's scheduler, one level up).

`ClusterCore.handle(event)` runs the global policy's hook for the event (core/global_policy.py)
and returns everything it decided as a `ClusterOutput` (core/output.py). The policy sees each
instance through one `Projected` view (core/projection.py) that stays the same object for the
life of the core, and writes its decisions into the event's `Decisions` (core/decisions.py).

Contract with whoever runs the core (the live scheduler, services/scheduler/core/admission.py
and its shell; the simulator, slomesh/sim): apply each output, in `ordered()` order, before
handing the core the next event, and let the instance views report the applied state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.events import (
    Abort,
    Arrival,
    ClusterEvent,
    EngineReject,
    Finish,
    LeasedPlacement,
    ReplicaState,
    SliceEnd,
    StepEnd,
    Tick,
)
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.output import ClusterOutput
from services.scheduler.core.projection import Projected


class ClusterCore:
    def __init__(self, policy: GlobalPolicy, instances: Iterable[InstanceView] = ()) -> None:
        self.policy = policy
        self._out = Decisions()
        self.views: dict[str, Projected] = {}
        """Every instance, as the policy sees it (stable objects: policies may keep them)."""
        self.healthy: dict[str, bool] = {}
        """False while an instance does not answer: it is offered no arrival and no tick."""
        for inst in instances:
            self.add_instance(inst)

    def add_instance(self, instance: InstanceView) -> None:
        """An instance joins (the policy meets it with the next arrival)."""
        self.views[instance.name] = Projected(instance, self._current)
        self.healthy[instance.name] = True

    def remove_instance(self, name: str) -> None:
        """Forget an instance the policy has not met yet (a run's set-up replaced it)."""
        self.views.pop(name, None)
        self.healthy.pop(name, None)

    def _current(self) -> Decisions:
        return self._out

    def view(self, name: str) -> Projected:
        return self.views[name]

    def handle(self, event: ClusterEvent, candidates: Sequence[str] | None = None) -> ClusterOutput:
        """The decisions `event` causes. candidates (arrivals only): the instances admission
        left open to it (default: every healthy instance)."""
        out = self._out = Decisions(event.now_s)
        policy = self.policy
        queued: tuple[str, ...] = ()
        match event:
            case Arrival(request=request, now_s=now):
                names = candidates if candidates is not None else self._healthy_names()
                policy.on_arrival(request, [self.views[n] for n in names], out, now)
                rid = request.request_id
                if not out.rejected(rid) and out.placed_anywhere(rid) is None:
                    queued = (rid,)
            case LeasedPlacement(request=request, instance=name, now_s=now):
                policy.on_placed(request, self.views[name], out, now)
            case StepEnd(instance=name, now_s=now):
                policy.on_step_end(self.views[name], out, now)
            case Finish(request=request, instance=name, output_tokens=n, now_s=now):
                if request is not None:
                    policy.on_finish(request, name, n, out, now)
            case EngineReject(request=request, instance=name, reason=reason, now_s=now):
                policy.on_engine_reject(request, name, reason, out, now)
            case SliceEnd(entry=entry, instance=name, now_s=now):
                policy.on_slice_end(entry, name, out, now)
            case Abort(request_id=rid, now_s=now):
                policy.on_abort(rid, out, now)
            case ReplicaState(instance=name, healthy=healthy, handed_over=moved, now_s=now):
                was = self.healthy.get(name)
                self.healthy[name] = healthy
                if was and not healthy and moved:
                    policy.on_instance_handed_over(name, out, now)
                elif was and not healthy:
                    policy.on_instance_lost(name, out, now)
            case Tick(now_s=now):
                for name in self._healthy_names():
                    policy.on_step_end(self.views[name], out, now)
        return out.build(queued)

    def _healthy_names(self) -> list[str]:
        return [n for n, ok in self.healthy.items() if ok]
