"""The discrete-event simulator: N instances, a global policy, per-engine policies, one workload.

Events are ordered by (time, kind, sequence). Arrivals are fed lazily, one pending at a time, so
the heap stays small for 100k-request traces. A run returns one RequestRecord per request.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence

from services.replica.core.sequence import Sequence as Seq
from services.scheduler.core import events as cluster
from services.scheduler.core.cluster_core import ClusterCore
from shared.domain import HardwareProfile, Request
from shared.metrics.records import InstanceStats, RequestRecord, RunResult
from shared.profiles.defaults import default_profile
from slomesh.sim.applier import SimApplier
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.events import Arrival, Event, Schedule
from slomesh.sim.instance import SimInstance
from slomesh.stacks import StackConfig


class SimulationStuck(RuntimeError):
    """The event queue drained while requests were still queued: a policy or engine bug."""


class Simulator:
    def __init__(
        self,
        cluster: ClusterSpec,
        stack: StackConfig,
        requests: Sequence[Request],
        progress: Callable[[int], None] | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.stack = stack
        self.global_policy = stack.global_policy(simulated=True)
        engine = cluster.engine.model_copy(
            update={
                "queue_policy": stack.queue_policy,
                "mode": stack.engine_mode,
                "preemption_mode": stack.preemption_mode,
                "scorpio": stack.scorpio,
            }
        )
        self.instances: list[SimInstance] = []
        """The instances arrivals may go to (an autoscaled run drains some out of it)."""
        self.core = ClusterCore(self.global_policy)
        """The scheduler's cluster core: every decision comes from it, as data."""
        self.applier = SimApplier(self)
        for spec in cluster.instances:
            profiles = _profiles(spec)
            for _ in range(spec.count):
                name = f"i{len(self.instances)}-{spec.gpu}"
                inst = SimInstance(name, spec.gpu, profiles, engine, spec.models[0])
                self.add_instance(inst)
                self.instances.append(inst)
        self.requests = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
        self._arrivals = iter(self.requests)
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = itertools.count()
        self._records: dict[str, RequestRecord] = {}
        self._placement: dict[str, str] = {}
        self._progress = progress
        self._timer = timer

    # ---- callbacks from events and the applier ------------------------------------------------
    def add_instance(self, inst: SimInstance) -> None:
        """Make `inst` known to the cluster core and the applier."""
        self.core.add_instance(inst)
        self.applier.add_instance(inst)

    def replace_instances(self, instances: list[SimInstance]) -> None:
        """Serve with `instances` instead (before the run starts)."""
        for old in self.instances:
            self.core.remove_instance(old.name)
            self.applier.instances.pop(old.name, None)
        self.instances = list(instances)
        for inst in self.instances:
            self.add_instance(inst)

    def decide(self, event: cluster.ClusterEvent) -> None:
        """The cluster core's decisions on `event`, applied at once. Arrivals may go to the
        instances of `self.instances` only."""
        candidates = None
        if isinstance(event, cluster.Arrival):
            candidates = [i.name for i in self.instances]
        self.applier.apply(self.core.handle(event, candidates))

    def next_arrival(self) -> list[Event]:
        req = next(self._arrivals, None)
        return [] if req is None else [Arrival(req.arrival_s, req)]

    def kick(self, inst: SimInstance, now_s: float) -> None:
        """Make an idle instance look at its queue at `now_s`."""
        if inst.in_flight is None and not inst.schedule_pending:
            inst.schedule_pending = True
            self._push(Schedule(now_s, inst))

    def record_placement(self, request_id: str, instance: str) -> None:
        self._placement[request_id] = instance

    def reject(self, request: Request, reason: str, now_s: float) -> None:
        self._add_record(
            RequestRecord.from_request(request, None, None, None, 0, 0, reason, rejected_s=now_s)
        )

    def record_finish(self, seq: Seq, instance: str) -> None:
        r = seq.request
        assert seq.finish_s is not None
        self.decide(cluster.Finish(r.request_id, instance, seq.num_output_tokens, seq.finish_s, r))
        self._add_record(
            RequestRecord.from_request(
                r,
                instance,
                seq.first_token_s,
                seq.finish_s,
                seq.num_output_tokens,
                seq.preemptions,
            )
        )

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> RunResult:
        t0 = self._timer()
        for ev in self.next_arrival():
            self._push(ev)
        now = 0.0
        while self._heap:
            now, _, _, ev = heapq.heappop(self._heap)
            for new in ev.handle(self):
                self._push(new)
        stuck = [i.name for i in self.instances if i.core.has_work or i.core.status().evicted]
        if stuck or len(self._records) != len(self.requests):
            raise SimulationStuck(
                f"simulation ended at t={now:.3f}s with work left on {stuck or 'no instance'}; "
                f"{len(self.requests) - len(self._records)} requests unaccounted for"
            )
        start = self.requests[0].arrival_s if self.requests else 0.0
        end = max((r.finish_s for r in self._records.values() if r.finish_s), default=start)
        records = [self._records[r.request_id] for r in self.requests]
        return RunResult(
            self.stack.name, records, self._stats(start, end), start, end, self._timer() - t0
        )

    def _push(self, ev: Event) -> None:
        heapq.heappush(self._heap, (ev.time_s, int(ev.order), next(self._seq), ev))

    def _add_record(self, rec: RequestRecord) -> None:
        self._records[rec.request_id] = rec
        if self._progress is not None:
            self._progress(1)

    def _stats(self, start: float, end: float) -> list[InstanceStats]:
        span = max(end - start, 1e-12)
        out = []
        for inst in self.instances:
            mine = [r for r in self._records.values() if r.instance == inst.name and r.finished]
            c = inst.core
            cache = c.planner.state.prefix_cache
            out.append(
                InstanceStats(
                    instance=inst.name,
                    gpu=inst.gpu,
                    busy_s=c.busy_s,
                    kv_occupancy_mean=c.kv_block_seconds / span,
                    evictions=c.preemptions,
                    swaps=c.model_swaps,
                    last_finish_s=max((r.finish_s for r in mine if r.finish_s), default=None),
                    requests_finished=len(mine),
                    prefix_hit_tokens=cache.hit_tokens if cache else 0,
                    prefix_prompt_tokens=cache.prompt_tokens if cache else 0,
                )
            )
        return out


def _profiles(spec: InstanceSpec) -> dict[str, HardwareProfile]:
    tp = spec.tensor_parallel
    if tp is None:  # one TP degree for the whole instance: what its largest model needs
        tp = max(default_profile(spec.gpu, m).tensor_parallel for m in spec.models)
    return {m: default_profile(spec.gpu, m, tp) for m in spec.models}
