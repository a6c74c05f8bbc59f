"""The live scheduler in the simulator: AdmissionCore (and its cluster core) over simulated engines.

Every arrival goes through the same admission code the live scheduler runs
(services/scheduler/core/admission.py): no serving replica, the global-queue and in-flight
limits, the TTFT guard at admission, the drain-rate rejection, shedding for more critical work,
and then the global policy's placement, queueing or rejection. Queued requests are re-checked on
the same tick as live (`tick_interval_ms`: pulls, and answers to those that can no longer start
in time). Each cluster event of the simulator becomes the AdmissionCore call the live shell makes
for it; the cluster core's outputs come back for the simulator's applier (rejections stripped:
like the live shell, the simulator answers a request with a rejection exactly when admission
says so: `answered`).

The admission rules read the scheduler's own books (requests admitted and not finished per
replica), as live. The policy reads the simulated engines (their true state) and hears every
engine step end, and the TTFT guard reads each engine's queue as a fresh report at every
arrival; with `books` (the live view, slomesh/sim/live_view.py) the policy reads the books as
the live policy does, hears no step end (a finish, reported when the simulator delivers it,
lets its replica pull, as a live report does), and the guard reads the reports the simulator
hands it (`probe`) at the live Status interval.

The books plan with the profiles the live scheduler is given (`plan_with`: its published
profile files, which it never recalibrates), where those differ from the simulated engines'
(a profile calibrated on the live mesh): the TTFT guard's prediction and the placers' estimates
are then the live ones, while the engines run at the speed measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.args import SchedulerArgs
from services.scheduler.core import events as ev
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.leases import LeaseBook, LeaseConfig
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.output import ClusterOutput, Rejection
from services.scheduler.core.ttft_admission import (
    QueueReport,
    TTFTAdmission,
    TTFTAdmissionConfig,
)
from shared.domain import HardwareProfile, Request
from slomesh.sim.instance import SimInstance
from slomesh.stacks.config import StackConfig


def _live_default(name: str) -> float | None:
    default = SchedulerArgs.model_fields[name].default
    assert default is None or isinstance(default, int | float)
    return default


class SimAdmissionConfig(BaseModel):
    """The live scheduler's admission settings, as the simulator runs them (defaults: the live
    scheduler's, services/scheduler/args.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    max_in_flight_per_replica: int = Field(_live_default("max_in_flight_per_replica"), ge=1)  # type: ignore[assignment]
    """Admission limit per replica; beyond it requests are rejected (replicas-full)."""
    max_queued_requests: int = Field(_live_default("max_queued_requests"), ge=0)  # type: ignore[assignment]
    """Requests held in the global queue at most (queue-full beyond it)."""
    max_queue_wait_ms: float | None = Field(_live_default("max_queue_wait_ms"), gt=0)
    """Longest a request waits in the global queue before it is answered with a rejection
    (None: until its TTFT deadline is `queue_reject_margin_ms` away)."""
    queue_reject_margin_ms: float = Field(_live_default("queue_reject_margin_ms"), ge=0)  # type: ignore[assignment]
    """A queued request whose TTFT deadline is closer than this is answered at once."""
    tick_interval_ms: float = Field(_live_default("tick_interval_ms"), gt=0)  # type: ignore[assignment]
    """How often queued work is re-checked (pulls, expiry) while anything is queued."""
    leases: LeaseConfig = LeaseConfig()
    """The credits it grants the ingresses' fast path (core/leases.py; the fast path runs
    only with a simulated ingress, slomesh/sim/leases.py)."""

    @classmethod
    def of_stack(cls, stack: StackConfig) -> SimAdmissionConfig:
        """The live defaults with the settings `stack` sets (its in-flight cap), as
        `slomesh up --stack` runs them (slomesh/stacks/live.py)."""
        if stack.max_in_flight_per_replica is None:
            return cls()
        return cls(max_in_flight_per_replica=stack.max_in_flight_per_replica)


@dataclass
class SimBooks(LiveReplica):
    """The scheduler's books of one simulated instance: a LiveReplica serving every model the
    instance has a profile for (simulated instances may swap models)."""

    profiles: dict[str, HardwareProfile] | None = None

    def serves(self, model: str) -> bool:
        return self.profiles is not None and model in self.profiles

    def profile(self, model: str) -> HardwareProfile:
        if self.profiles is None or model not in self.profiles:
            raise ValueError(f"{self.application} has no profile for {model}")
        return self.profiles[model]


def _books(inst: SimInstance, planning: Mapping[str, HardwareProfile]) -> SimBooks:
    profiles = {m: planning.get(m, p) for m, p in inst.core.tiers.profiles.items()}
    model = inst.core.tiers.active or next(iter(profiles))
    return SimBooks(
        application=inst.name,
        gpu_name=inst.gpu,
        model=model,
        profile_=profiles[model],
        token_budget=inst.token_budget,
        max_num_seqs=inst.max_num_seqs,
        # its other models, as a live replica lists its swap_models (a replica that may swap
        # offers no lease credits: core/leases.py)
        swap_profiles={m: p for m, p in profiles.items() if m != model},
        profiles=profiles,
    )


class SimScheduler:
    def __init__(
        self,
        policy: GlobalPolicy,
        label: str,
        instances: Sequence[SimInstance],
        config: SimAdmissionConfig,
        ttft_guard: TTFTAdmissionConfig,
        books: bool = False,
    ) -> None:
        """books: the policy reads the scheduler's books, as live (module docstring)."""
        self.cfg = config
        self.books = books
        self.views = list(instances)
        self.planning: dict[str, HardwareProfile] = {}
        """The profiles the books plan with, by model, in place of the engines' (`plan_with`)."""
        self.admission = AdmissionCore(
            [_books(i, self.planning) for i in instances],
            policy,
            label,
            config.max_in_flight_per_replica,
            config.max_queued_requests,
            None if config.max_queue_wait_ms is None else config.max_queue_wait_ms / 1e3,
            views=None if books else self.views,
        )
        self.admission.record_outputs = True
        self.admission.ttft = TTFTAdmission(ttft_guard)
        self.requests: dict[str, Request] = {}
        self.answered: list[Rejection] = []
        self.leases = LeaseBook(config.leases)
        """The credit windows it granted the simulated ingresses (core/leases.py)."""

    @property
    def queued(self) -> int:
        return self.admission.queued

    def add_instance(self, inst: SimInstance, serving: bool) -> None:
        """An instance joins (an autoscaled run starts one); it takes arrivals once serving."""
        books = _books(inst, self.planning)
        books.healthy = serving
        self.views.append(inst)
        self.admission.replicas[inst.name] = books
        self.admission.core.add_instance(books if self.books else inst)
        self.admission.core.healthy[inst.name] = serving

    def plan_with(self, profiles: Mapping[str, HardwareProfile]) -> None:
        """The books plan with `profiles` (by model) in place of the engines' own, as the live
        scheduler plans with the profile files it is given (before the run starts)."""
        self.planning = dict(profiles)
        for inst in self.views:
            books = self.admission.replicas.get(inst.name)
            if isinstance(books, SimBooks):
                fresh = _books(inst, self.planning)
                books.profile_, books.profiles = fresh.profile_, fresh.profiles
                books.swap_profiles = fresh.swap_profiles

    def serving(self, names: set[str], now_s: float) -> None:
        """Only `names` take new arrivals (an autoscaled run drains the others)."""
        for name, rep in self.admission.replicas.items():
            if rep.healthy != (name in names):
                self.admission.set_health(name, name in names, now_s)

    def handle(self, event: ev.ClusterEvent) -> list[ClusterOutput]:
        """The AdmissionCore call the live shell makes for `event`; the outputs it caused."""
        adm = self.admission
        now = event.now_s
        match event:
            case ev.Arrival(request=request):
                self.requests[request.request_id] = request
                if not self.books:
                    self._reports(now)
                decision = adm.admit(request, now)
                if not decision.admitted:
                    self._answer(
                        request, decision.reason, decision.drop_reason, now, decision.retry_after_s
                    )
            case ev.StepEnd(instance=name):
                if not self.books:  # live, no step is heard of
                    adm.step_end(name, now)
            case ev.Finish(request_id=rid, output_tokens=n):
                adm.report(rid, n, now, pull=self.books)
            case ev.LeasedPlacement(request=request, instance=name):
                self.requests[request.request_id] = request
                adm.place_leased(request, name, now)
            case ev.EngineReject(request=request, instance=name, reason=reason):
                adm.engine_reject(request, name, reason, now)
            case ev.SliceEnd(entry=entry):
                adm.resume_slice(entry.request, entry.output_tokens, now, entry)
            case ev.Tick():
                adm.tick(now)
                margin = self.cfg.queue_reject_margin_ms / 1e3
                for rid in adm.expire_queued(now, margin):
                    reason = "overloaded: TTFT deadline cannot be met from the queue"
                    self._answer(self.requests[rid], reason, "deadline-expired", now)
            case _:
                raise ValueError(f"the simulator sends no {type(event).__name__} event")
        for rid, reason in adm.take_shed():
            self._answer(self.requests[rid], reason, "shed-for-critical", now)
        return [replace(out, rejections=()) for out in adm.take_outputs()]

    def grant(self, ingress: str, now_s: float) -> dict[str, int]:
        """The lease grant the live scheduler answers `ingress`'s `Sync` with now (no replica is
        pooled here: each simulated instance is one application)."""
        adm = self.admission
        return self.leases.offer(
            ingress,
            adm.replicas.values(),
            adm.queued,
            adm.max_in_flight,
            frozenset(),
            adm.policy.supports_leases,
            now_s,
        )

    def take_answered(self) -> list[Rejection]:
        """Requests answered with a rejection since the last call."""
        out, self.answered = self.answered, []
        return out

    def _answer(
        self, request: Request, reason: str, drop: str, now_s: float, retry_after_s: float = 1.0
    ) -> None:
        self.answered.append(Rejection(len(self.answered), request, reason, drop, retry_after_s))

    def _reports(self, now_s: float) -> None:
        """Every engine's queue as a fresh report for the TTFT guard."""
        if self.admission.ttft.cfg.enabled:
            self.probe(now_s)

    def probe(self, now_s: float) -> None:
        """Every engine's state as a Status answer at `now_s`: its queue for the TTFT guard,
        and what the live shell keeps of it in the books (LiveReplica.observe)."""
        for inst in self.views:
            self.observe(inst, now_s)

    def observe(self, inst: SimInstance, now_s: float) -> None:
        """`inst`'s state as the live shell takes a Status answer or a pushed state: its queue
        for the TTFT guard and what the books keep of it (LiveReplica.observe)."""
        st = inst.status()
        self.admission.ttft.update(inst.name, QueueReport.of(st, now_s))
        books = self.admission.replicas.get(inst.name)
        if books is not None:
            books.observe(st.active_model, st.swapping, st.loaded_adapters, st.deadline_ordered)
