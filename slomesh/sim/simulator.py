"""The discrete-event simulator: N instances, a global policy, per-engine policies, one workload.

Events are ordered by (time, kind, sequence). Arrivals are fed lazily, one pending at a time, so
the heap stays small for 100k-request traces. A run returns one RequestRecord per request.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from services.ingress.core.credits import Credit
from services.ingress.core.slice_budget import served_slice_tokens
from services.replica.core.sequence import Sequence as Seq
from services.scheduler.core import events as cev
from services.scheduler.core.output import Rejection
from services.scheduler.core.ttft_admission import TTFTAdmissionConfig
from shared.domain import Request
from shared.domain.scorpio import ScorpioConfig
from shared.metrics.records import InstanceStats, RequestRecord, RunResult
from slomesh.sim.applier import SimApplier
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.events import Arrival, Delivered, Event, Later, Probe, Schedule, Tick
from slomesh.sim.host_loads import HostLoads
from slomesh.sim.ingress import SimIngress, SimIngressConfig
from slomesh.sim.instance import SimInstance
from slomesh.sim.instance_profiles import instance_profiles
from slomesh.sim.leases import SimLeases, credits_of
from slomesh.sim.live_view import LiveTiming, LiveViewConfig
from slomesh.sim.scheduler import SimAdmissionConfig, SimScheduler
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
        admission: SimAdmissionConfig | None = None,
        ingress: SimIngressConfig | None = None,
        live_view: LiveViewConfig | None = None,
    ) -> None:
        """admission: the live scheduler's admission settings (default: its defaults with the
        stack's own, `SimAdmissionConfig.of_stack`);
        ingress: the live ingress's own admission in front of it (default: none); live_view:
        the policy reads the scheduler's books, reported late (slomesh/sim/live_view.py;
        default: the engines' exact state)."""
        self.stack = stack
        self.live = LiveTiming(live_view) if live_view is not None else None
        self.admission = admission if admission is not None else SimAdmissionConfig.of_stack(stack)
        self.ingress = SimIngress(ingress) if ingress is not None else None
        self.leases: SimLeases | None = None
        """The ingress's lease fast path (with a simulated ingress: slomesh/sim/leases.py)."""
        if ingress is not None and ingress.fast_path.enabled:
            self.leases = SimLeases(ingress.fast_path, ingress.num_replicas, self, self._later)
        self._ingress_of: dict[str, int] = {}
        """Requests let in by a simulated ingress replica, until their report: which one."""
        self.global_policy = stack.global_policy(simulated=True)
        slowdown = cluster.concurrent_load_slowdown
        self.host_loads = HostLoads(slowdown) if slowdown > 0 else None
        """The instances' model loads on one shared host (None: loads never slow each other)."""
        engine = cluster.engine.model_copy(
            update={
                "queue_policy": stack.queue_policy,
                "mode": stack.engine_mode,
                "preemption_mode": stack.preemption_mode,
                "scorpio": engine_scorpio(stack.scorpio),
                "report_waiting_prefill": admission_ttft_guard(stack.scorpio).deadline_aware,
            }
        )
        instances: list[SimInstance] = []
        for spec in cluster.instances:
            profiles = instance_profiles(spec)
            for _ in range(spec.count):
                name = f"i{len(instances)}-{spec.gpu}"
                instances.append(SimInstance(name, spec.gpu, profiles, engine, spec.models[0]))
        self.instances: list[SimInstance] = []
        """The instances arrivals may go to (an autoscaled run drains some out of it)."""
        self.applier = SimApplier(self)
        if self.ingress is not None:  # the live ingress's slice budget (core/slice_budget.py)
            self.applier.slice_tokens = served_slice_tokens
        self.replace_instances(instances)
        self._pending: list[cev.ClusterEvent] = []
        self._tick_due: float | None = None
        self.requests = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
        self._arrivals = iter(self.requests)
        self._heap: list[tuple[float, int, int, Event]] = []
        self._seq = itertools.count()
        self._records: dict[str, RequestRecord] = {}
        self._placement: dict[str, str] = {}
        self._arriving: str | None = None
        """The request whose arrival the scheduler is deciding (with a simulated ingress)."""
        self._verdict: Rejection | None = None
        """The scheduler's rejection of that arrival, if it rejected it."""
        self._progress = progress
        self._timer = timer

    # ---- callbacks from events and the applier ------------------------------------------------
    def add_instance(self, inst: SimInstance) -> None:
        """A new instance (an autoscaled run starts one): it takes arrivals once it is in
        `self.instances`."""
        self.scheduler.add_instance(inst, serving=False)
        self.applier.add_instance(inst)

    def replace_instances(self, instances: list[SimInstance]) -> None:
        """Serve with `instances` (before the run starts): a fresh scheduler over them."""
        self.instances = list(instances)
        self.scheduler = SimScheduler(
            self.global_policy,
            self.stack.name,
            self.instances,
            self.admission,
            admission_ttft_guard(self.stack.scorpio),
            books=self.live is not None,
        )
        """The live scheduler's admission and cluster core: every decision comes from it."""
        self.core = self.scheduler.admission.core
        """The scheduler's cluster core (what the admission hands each event to)."""
        self.applier.instances.clear()
        for inst in self.instances:
            self.applier.add_instance(inst)

    def decide(self, event: cev.ClusterEvent) -> None:
        """Hand `event` to the scheduler and apply its decisions at once (an arrival passes
        the ingress's own admission first, when it is simulated)."""
        if isinstance(event, cev.Finish):
            self._report(event)
            return
        if not isinstance(event, cev.Arrival):
            self.run_on(self.scheduler, event)
            return
        if self.ingress is not None and not self._ingress_admits(event):
            return
        request, now = event.request, event.now_s
        self.scheduler.serving({i.name for i in self.instances}, now)
        if self.ingress is not None:
            self._ingress_of[request.request_id] = self.ingress.replica_of(request.request_id)
        if self.leases is not None and self._on_credit(request, now):
            return
        hop = self.live.admission_hop_s(request.request_id) if self.live is not None else 0.0
        if hop > 0:  # the scheduler checks it that long after the ingress let it in
            self._push(Later(now + hop, lambda t: self._admit(cev.Arrival(request, now_s=t))))
            return
        self._admit(event)

    def _admit(self, event: cev.Arrival) -> None:
        """The scheduler's admission check of `event`'s request (Admit) and its verdict heard."""
        request, now = event.request, event.now_s
        self._arriving, self._verdict = request.request_id, None
        self.run_on(self.scheduler, event)
        self._arriving = None
        if self.ingress is not None:
            self.ingress.heard(request, self._verdict, now)
        if self.leases is not None and self._verdict is None:
            self.leases.admitted(self._ingress_of[request.request_id], request.model, now)

    def _on_credit(self, request: Request, now_s: float) -> bool:
        """The ingress replica that let `request` in places it on a lease credit, if it holds
        one (slomesh/sim/leases.py): straight onto that replica's engine."""
        assert self.leases is not None and self.ingress is not None
        rid = request.request_id
        application = self.leases.take(self._ingress_of[rid], request, now_s)
        if application is None:
            return False
        self.ingress.placed_on_credit(rid)
        self.applier.place(request, application, now_s)
        return True

    def _report(self, event: cev.Finish) -> None:
        """A completion report reaches the scheduler (after the placement it ends, when that
        was made on a lease credit; the report's `Sync` answers its ingress with a grant)."""
        rid = event.request_id
        if self.leases is not None and self.leases.unnoticed(rid):
            self.leases.hold(rid, lambda t: self._report(replace(event, now_s=t)))
            return
        self.run_on(self.scheduler, event)
        ingress = self._ingress_of.pop(rid, None)
        if self.leases is not None and ingress is not None:
            self.leases.reported(ingress, event.now_s)

    # ---- the fast path's host (slomesh/sim/leases.py) -----------------------------------
    def notice(self, ingress: str, request: Request, application: str, now_s: float) -> None:
        self.scheduler.leases.noticed(ingress, application)
        self.run_on(self.scheduler, cev.LeasedPlacement(request, application, now_s=now_s))

    def grant(self, ingress: str, now_s: float) -> tuple[list[Credit], float]:
        limits = self.scheduler.grant(ingress, now_s)
        models = {name: rep.model for name, rep in self.scheduler.admission.replicas.items()}
        ttl_s = self.scheduler.leases.config.ttl_ms / 1e3
        return credits_of(limits, models), ttl_s

    def _later(self, timer: tuple[float, Callable[[float], None]]) -> None:
        self._push(Later(*timer))

    def _ingress_admits(self, event: cev.Arrival) -> bool:
        """The ingress lets `event`'s request on to the scheduler (else it is rejected)."""
        assert self.ingress is not None
        self.ingress.first_tokens(event.now_s, self._sequence)
        reason = self.ingress.admit(event.request, event.now_s)
        if reason is None:
            return True
        self.reject(event.request, reason, event.now_s)
        return False

    def _sequence(self, request_id: str) -> Seq | None:
        """`request_id`'s engine sequence while its instance holds it."""
        name = self._placement.get(request_id)
        inst = next((i for i in self.instances if i.name == name), None)
        return inst.core.sequence(request_id) if inst is not None else None

    def run_on(self, scheduler: SimScheduler, event: cev.ClusterEvent) -> None:
        """`scheduler` handles `event`; its decisions (and those of the events applying them
        causes) are applied at once; a scheduler tick is due while anything is queued."""
        self._pending.append(event)
        while self._pending:
            for out in scheduler.handle(self._pending.pop(0)):
                self.applier.apply(out)
            for rejection in scheduler.take_answered():
                self.reject(rejection.request, rejection.reason, event.now_s)
                if rejection.request.request_id == self._arriving:
                    self._verdict = rejection
        if scheduler.queued and self._tick_due is None:
            self._tick_due = event.now_s + self.admission.tick_interval_ms / 1e3
            self._push(Tick(self._tick_due))

    def scheduler_tick(self, now_s: float) -> None:
        """The scheduler's periodic tick (while anything is queued, as live)."""
        self._tick_due = None
        self.decide(cev.Tick(now_s=now_s))

    def too_large(self, request: Request, reason: str, instance: str, now_s: float) -> None:
        """A placed request can never fit `instance`'s KV cache: rejected there, its place in
        the scheduler's books freed (as an engine rejection)."""
        self.reject(request, reason, now_s)
        self._pending.append(cev.EngineReject(request, instance, reason, now_s=now_s))

    def probe(self, now_s: float) -> list[Event]:
        """The scheduler's Status probe (the live view): every engine's queue for the TTFT
        guard and its state for the books; the next probe while any request is still to end."""
        self.scheduler.probe(now_s)
        if self.live is None or len(self._records) == len(self.requests):
            return []
        return [Probe(now_s + self.live.config.status_interval_s)]

    def swap_ended(self, instance: SimInstance, now_s: float) -> None:
        """A model load ended on `instance`: under the live view its state reaches the books at
        once, as the live replica pushes it (services/replica/state_push.py)."""
        if self.live is not None:
            self.scheduler.observe(instance, now_s)

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
        if self.ingress is not None:
            self.ingress.finished(request.request_id, 0, now_s)
        self._add_record(
            RequestRecord.from_request(request, None, None, None, 0, 0, reason, rejected_s=now_s)
        )

    def record_finish(self, seq: Seq, instance: str) -> None:
        r = seq.request
        assert seq.finish_s is not None
        if self.ingress is not None:
            self.ingress.finished(
                r.request_id, seq.num_output_tokens, seq.finish_s, seq.first_token_s
            )
        if self.leases is not None:
            self.leases.finished(r.request_id, seq.finish_s)
        if self.live is None:
            self.decide(
                cev.Finish(r.request_id, instance, seq.num_output_tokens, r, now_s=seq.finish_s)
            )
        else:  # the books hear of it when its report comes
            at = seq.finish_s + self.live.report_delay_s()
            finish = cev.Finish(r.request_id, instance, seq.num_output_tokens, r, now_s=at)
            self._push(Delivered(at, finish))
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
            if self.live is not None:  # live, the scheduler probes every replica, guard or not
                self._push(Probe(self.live.first_probe_s(ev.time_s)))
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


def engine_scorpio(scorpio: ScorpioConfig | None) -> ScorpioConfig | None:
    """SCORPIO at the engines, as the live mesh runs it: the TTFT guard runs at admission
    (admission_ttft_guard), so an engine keeps SCORPIO only for credit batching or VBS."""
    if scorpio is None or not (scorpio.credit_batching or scorpio.vbs_admission):
        return None
    return scorpio.model_copy(update={"ttft_guard": False})


def admission_ttft_guard(scorpio: ScorpioConfig | None) -> TTFTAdmissionConfig:
    """The stack's TTFT guard (its admitter), at admission: its one home, live and simulated."""
    if scorpio is None or not scorpio.ttft_guard:
        return TTFTAdmissionConfig()
    return TTFTAdmissionConfig(
        enabled=True,
        margin_s=scorpio.ttft_margin_s,
        deadline_aware=scorpio.ttft_deadline_aware,
        bounds_in_flight=scorpio.ttft_bounds_in_flight,
    )
