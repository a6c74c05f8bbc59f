"""Admission and placement: the scheduler's decision for one request, from metadata only.

Routing stacks place a request at once on a replica serving its model with room (in-flight below
the limit); otherwise it is rejected at once with the rule that failed and a Retry-After hint,
never queued to time out. Queueing stacks (`qlm`) may instead hold the request in their global
queue: `admit` then answers `queued`, and the request is dispatched later, when a replica pulls it
(after a report frees room, or on a `tick`). `take_dispatched` hands the shell every placement the
policy made since the last call, whichever call caused it. A queue longer than `max_queued` is
answered with a rejection, not a hang.

Bands: every rejection carries a short drop reason (DROP_REASONS, the ingress's
`x-slomesh-drop-reason`). Sheddable requests (criticality < 0) go first under saturation: a
full queue sheds its newest, least critical sheddable request to make room for a more critical
arrival; a sheddable arrival counts every queued request of its band or above as ahead of it
(bands are served first, whatever their deadlines); and queued requests the policy sheds
(qlm/shedding.py) come back from `take_shed` for the shell to answer at once.

The policy runs in the cluster core (cluster_core.py): each call here hands it events and books
the decisions it returns (`_book`): placements into the replicas' books and the dispatches,
evictions and resumes as the replicas' pending actions, rejections as answers.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from services.scheduler.core.admit_decision import DROP_REASONS, AdmitDecision
from services.scheduler.core.cluster_core import ClusterCore
from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.drain_rate import DrainRate
from services.scheduler.core.events import (
    Abort,
    Arrival,
    EngineReject,
    Finish,
    LeasedPlacement,
    SliceEnd,
    StepEnd,
    Tick,
)
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.live_view import LiveReplica, ReplicaAction
from services.scheduler.core.output import (
    BatchPlacement,
    ClusterOutput,
    Eviction,
    ModelSwap,
    Placement,
    Rejection,
    Resume,
)
from services.scheduler.core.replica_health import ReplicaHealth
from services.scheduler.core.ttft_admission import TTFTAdmission
from shared.domain import Request
from shared.domain.engine import SliceEntry

__all__ = ["DROP_REASONS", "AdmissionCore", "AdmitDecision"]


class AdmissionCore(ReplicaHealth):
    def __init__(
        self,
        replicas: list[LiveReplica],
        policy: GlobalPolicy,
        stack: str,
        max_in_flight: int,
        max_queued: int = 100_000,
        max_queue_wait_s: float | None = None,
        views: Sequence[InstanceView] | None = None,
    ) -> None:
        if not replicas:
            raise ValueError("scheduler.replicas must list at least one replica")
        if max_in_flight < 1:
            raise ValueError(
                f"scheduler.max_in_flight_per_replica must be >= 1, got {max_in_flight}"
            )
        if max_queued < 0:
            raise ValueError(f"scheduler.max_queued_requests must be >= 0, got {max_queued}")
        self.replicas = {r.application: r for r in replicas}
        self.policy = policy
        self.core = ClusterCore(policy, views if views is not None else replicas)
        """The cluster core: the policy's decisions on each event, as data. It sees `views`
        (the simulator's engines) when given, else the replicas' books."""
        for r in replicas:
            self.core.healthy[r.application] = r.healthy
        self.record_outputs = False
        """Keep every output of the core for `take_outputs` (the simulator applies them)."""
        self._outputs: list[ClusterOutput] = []
        self.stack = stack
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.max_queue_wait_s = max_queue_wait_s
        self.drain = DrainRate()
        self._owner: dict[str, LiveReplica] = {}
        self._queued: dict[str, Request] = {}
        self._deadlines: list[float] = []
        """TTFT deadlines of the queued requests, sorted (how many are due before a new one)."""
        self._dispatched: list[tuple[Request, LiveReplica]] = []
        self._rejections: dict[str, Rejection] = {}
        """The policy's rejections not yet answered, by request id (an arrival's own, or queued
        requests it shed)."""
        self._shed: list[tuple[str, str]] = []
        """Queued requests shed by the policy or for a more critical arrival: (id, reason)."""
        self.ttft = TTFTAdmission()
        """The scheduler-side TTFT guard (ttft_admission.py); disabled until configured."""
        self.admitted = 0
        self.rejected = 0
        self.released = 0
        """Admissions released by reconciliation (no report ever came)."""
        self._continuing: set[str] = set()
        """Requests back from a slice end (resume_slice): started streams, never expired."""
        self._probe_failures: dict[str, tuple[int, float]] = {}
        """Missed Status probes in a row per replica, and when the first of them was."""
        self.excused_misses = 0
        """Missed probes that would have made a replica unhealthy, excused as it swaps
        (replica_health.py)."""

    @property
    def queued(self) -> int:
        return len(self._queued)

    def queued_requests(self, model: str) -> list[Request]:
        """The requests of `model` waiting in the global queue (the autoscaling signal)."""
        return [r for r in self._queued.values() if r.model == model]

    def admit(self, request: Request, now_s: float) -> AdmitDecision:
        views = self.core.views
        serving = [r for r in self.replicas.values() if views[r.application].serves(request.model)]
        if not serving:
            return self._reject(f"no replica serves model '{request.model}'", 0.0, "no-replica")
        serving = [r for r in serving if r.healthy]
        if not serving:
            return self._reject(
                f"unavailable: no healthy replica serves model '{request.model}'",
                0.0,
                "unavailable",
            )
        if len(self._queued) >= self.max_queued and not self._make_room(request):
            return self._reject(
                f"overloaded: {len(self._queued)} requests queued (max_queued_requests)",
                1.0,
                "sheddable-saturated" if request.sheddable else "queue-full",
            )
        open_ = [
            r
            for r in serving
            if len(r.in_flight) < self.max_in_flight * r.engines
            or self.ttft.bounds(r, request.model, now_s)
        ]
        if not open_:
            return self._reject(
                f"overloaded: all {len(serving)} replicas of '{request.model}' have "
                f"{self.max_in_flight} requests in flight",
                1.0,
                "sheddable-saturated" if request.sheddable else "replicas-full",
            )
        verdict = self.ttft.check(request, open_, now_s)  # off unless configured
        if verdict.rejected:
            return self._reject(verdict.reason, verdict.retry_after_s, "deadline-infeasible")
        open_ = verdict.candidates
        budget_s = self._wait_budget_s(request, now_s)
        if request.sheddable:  # every request of its band or above is served first
            ahead = sum(r.criticality >= request.criticality for r in self._queued.values())
        else:
            ahead = bisect.bisect_right(self._deadlines, request.ttft_deadline_abs_s)
        wait_s = self.drain.expected_wait_s(ahead, now_s) if ahead else None
        if wait_s is not None and wait_s > budget_s:
            return self._reject(
                f"overloaded: {ahead} requests queued ahead drain in ~{wait_s:.1f} s, "
                f"more than this request may wait ({max(budget_s, 0.0):.1f} s)",
                min(max(1.0, wait_s - budget_s), 30.0),
                "sheddable-saturated" if request.sheddable else "deadline-infeasible",
            )
        self._enqueue(request)
        candidates = [r.application for r in open_]
        self._book(self.core.handle(Arrival(request, now_s=now_s), candidates))
        own = self._rejections.pop(request.request_id, None)
        self._take_policy_rejections()
        if own is not None:
            self._dequeue(request.request_id)
            return self._reject(own.reason, own.retry_after_s, own.drop_reason)
        self.admitted += 1
        chosen = self._owner.get(request.request_id)
        if chosen is None:
            return AdmitDecision(True, None, stack=self.stack, queued=True)
        return AdmitDecision(True, chosen, stack=self.stack)

    def resume_slice(
        self,
        request: Request,
        output_tokens: int,
        now_s: float,
        entry: SliceEntry | None = None,
    ) -> AdmitDecision:
        """`request`'s slice ended unfinished after `output_tokens` tokens (slice-level serving):
        it leaves its replica and goes back to the policy's pool with its context (prompt + those
        tokens), keeping its arrival and deadlines (the booked Request when the scheduler still
        has it). No admission rule applies: its stream has started. Answers like `admit`.
        entry: the slice end as the engine reports it (first token time, preemptions)."""
        rid = request.request_id
        owner = self._owner.pop(rid, None)
        booked = owner.forget(rid) if owner is not None else None
        request = booked or request
        self._continuing.add(rid)
        self._enqueue(request)
        if entry is None:
            entry = SliceEntry(request, output_tokens)
        else:
            entry = SliceEntry(request, output_tokens, entry.first_token_s, entry.preemptions)
        self._book(
            self.core.handle(SliceEnd(entry, owner.application if owner else "", now_s=now_s))
        )
        chosen = self._owner.get(rid)
        return AdmitDecision(True, chosen, stack=self.stack, queued=chosen is None)

    def slice_tokens(self, request_id: str) -> int:
        """The slice budget of a placed request (0: no slice, run to the end)."""
        owner = self._owner.get(request_id)
        return owner.slice_tokens.get(request_id, 0) if owner is not None else 0

    def place_leased(self, request: Request, application: str, now_s: float) -> bool:
        """An ingress placed `request` on `application` with lease credits (leases.py) and tells
        of it now: it runs there already, so it is recorded in these books and the policy's
        (which may evict it later, as any placement). False: unknown replica, a policy that
        takes no leases, or an id already known (nothing recorded)."""
        rep = self.replicas.get(application)
        known = request.request_id in self._owner or request.request_id in self._queued
        if rep is None or known or not self.policy.supports_leases:
            return False
        self._book(self.core.handle(LeasedPlacement(request, application, now_s=now_s)))
        self.admitted += 1
        return True

    def _make_room(self, request: Request) -> bool:
        """The queue is full: shed its newest queued request of the least critical band, when
        that band is sheddable and below `request`'s. True when room was made."""
        victims = [r for r in self._queued.values() if r.sheddable]
        if not victims:
            return False
        victim = min(victims, key=lambda r: (r.criticality, -r.arrival_s))
        if victim.criticality >= request.criticality:
            return False
        self._dequeue(victim.request_id)
        self._book(self.core.handle(Abort(victim.request_id, now_s=0.0)))
        self._shed.append((victim.request_id, "shed: queue full, a more critical request came"))
        return True

    def _take_policy_rejections(self) -> None:
        """Queued requests the policy rejected (shed) leave the queue, to be answered at once."""
        for rid, rejection in self._rejections.items():
            if self._dequeue(rid) is not None:
                self._shed.append((rid, rejection.reason))
        self._rejections.clear()

    def take_shed(self) -> list[tuple[str, str]]:
        """Queued requests shed since the last call, (id, reason): the shell answers each at once
        with 429 + Retry-After and the drop reason "shed-for-critical"."""
        self.rejected += len(self._shed)
        out, self._shed = self._shed, []
        return out

    def report(
        self, request_id: str, output_tokens: int = 0, now_s: float = 0.0, pull: bool = True
    ) -> LiveReplica | None:
        """The request finished (or failed): free its place. Unknown ids are ignored. pull: let
        its replica pull at once (the simulator's own step end does that)."""
        self._continuing.discard(request_id)
        owner = self._owner.pop(request_id, None)
        if owner is None:
            if self._dequeue(request_id) is not None:  # left the queue before being pulled
                self._book(self.core.handle(Abort(request_id, now_s=now_s)))
            return None
        request = owner.forget(request_id)
        name = owner.application
        if request is not None:
            self._book(
                self.core.handle(Finish(request_id, name, output_tokens, request, now_s=now_s))
            )
        if pull and owner.healthy:  # room freed: the replica may pull
            self._book(self.core.handle(StepEnd(name, now_s=now_s)))
        return owner

    def expire_queued(self, now_s: float, margin_s: float) -> list[str]:
        """Take out of the queue every request that can no longer start in time: its TTFT
        deadline is less than `margin_s` away, or it has waited max_queue_wait_s. Returns their ids;
        the shell answers each with 429 + Retry-After at once instead of letting it time out."""
        out = [
            rid
            for rid, r in self._queued.items()
            if rid not in self._continuing
            and now_s >= min(r.ttft_deadline_abs_s - margin_s, self._wait_until_s(r))
        ]
        for rid in out:
            self._dequeue(rid)
            self._book(self.core.handle(Abort(rid, now_s=now_s)))
        self.rejected += len(out)
        return out

    def tick(self, now_s: float) -> None:
        """Periodic: let every replica pull and the policy re-check its predictions."""
        self._book(self.core.handle(Tick(now_s=now_s)))
        self._take_policy_rejections()

    def step_end(self, application: str, now_s: float) -> None:
        """An engine step of `application` ended (the simulator's engines): it may pull."""
        self._book(self.core.handle(StepEnd(application, now_s=now_s)))

    def engine_reject(self, request: Request, application: str, reason: str, now_s: float) -> None:
        """`application`'s engine turned a placed request away: its place is free again."""
        owner = self._owner.pop(request.request_id, None)
        if owner is not None:
            owner.forget(request.request_id)
        self._continuing.discard(request.request_id)
        self._book(self.core.handle(EngineReject(request, application, reason, now_s=now_s)))

    def take_outputs(self) -> list[ClusterOutput]:
        """The core's outputs since the last call, in order (with `record_outputs` set)."""
        out, self._outputs = self._outputs, []
        return out

    def take_dispatched(self) -> list[tuple[Request, LiveReplica]]:
        """Placements made since the last call (queued requests pulled by a replica)."""
        out, self._dispatched = self._dispatched, []
        return out

    def take_actions(self) -> list[ReplicaAction]:
        """Evict/resume decisions of the policy for the shell to send to replicas."""
        return [a for r in self.replicas.values() for a in r.take_actions()]

    def _enqueue(self, request: Request) -> None:
        self._queued[request.request_id] = request
        bisect.insort(self._deadlines, request.ttft_deadline_abs_s)

    def _dequeue(self, request_id: str) -> Request | None:
        request = self._queued.pop(request_id, None)
        if request is not None:
            i = bisect.bisect_left(self._deadlines, request.ttft_deadline_abs_s)
            del self._deadlines[i]
        return request

    def _book(self, out: ClusterOutput) -> None:
        """Book the cluster core's decisions, in order: placements in the replicas' books (a
        queued one is also a dispatch for the shell), evictions and resumes as the replicas'
        pending actions, rejections to be answered, a model swap as the replica's pending
        SwapModel (a prewarm is nothing to do; an adapter load is the replica's own, when the
        request placed after it arrives: services/replica/adapters.py)."""
        now_s = out.now_s
        if self.record_outputs:
            self._outputs.append(out)
        for action in out.ordered():
            match action:
                case Placement(request=request, instance=name):
                    self._placed(request, self.replicas[name], now_s, 0)
                case BatchPlacement(instance=name, entries=entries, iterations=iterations):
                    for e in entries:
                        self._placed(e.request, self.replicas[name], now_s, iterations)
                case Rejection(request=request):
                    self._rejections[request.request_id] = action
                case Eviction(instance=name, request_ids=ids):
                    self.replicas[name].book_eviction(ids)
                case Resume(instance=name, request_ids=ids):
                    self.replicas[name].book_resume(ids)
                case ModelSwap(instance=name, model=model, kind="load", adapter=None):
                    self.replicas[name].book_swap(model)

    def _placed(self, request: Request, rep: LiveReplica, now_s: float, slice_tokens: int) -> None:
        rep.book(request, now_s, slice_tokens)
        self._owner[request.request_id] = rep
        if self._dequeue(request.request_id) is not None:
            self._dispatched.append((request, rep))
            self.drain.record(now_s)

    def _wait_until_s(self, request: Request) -> float:
        """When `request` has waited the longest the queue may hold it (None: no cap beyond
        its TTFT deadline)."""
        cap = self.max_queue_wait_s
        return request.arrival_s + cap if cap is not None else request.ttft_deadline_abs_s

    def _wait_budget_s(self, request: Request, now_s: float) -> float:
        """How long `request` may still wait in the queue."""
        return min(request.ttft_deadline_abs_s, self._wait_until_s(request)) - now_s

    def _reject(self, reason: str, retry_after_s: float, drop_reason: str) -> AdmitDecision:
        self.rejected += 1
        return AdmitDecision(
            False, None, reason, retry_after_s, self.stack, drop_reason=drop_reason
        )
