"""Admission and placement: the scheduler's decision for one request, from metadata only.

A request is admitted when some replica serving its model has room (in-flight below the limit);
the serving stack's global policy picks which. Otherwise it is rejected at once with the rule
that failed and a Retry-After hint, never queued to time out.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.scheduler.core.live_view import LiveReplica, ReplicaAction
from services.scheduler.stacks import STACKS
from shared.domain import Request


@dataclass(frozen=True, slots=True)
class AdmitDecision:
    admitted: bool
    replica: LiveReplica | None
    reason: str = ""
    retry_after_s: float = 0.0
    policy: str = ""


class _Rejection:
    def __init__(self) -> None:
        self.reason: str | None = None

    def reject(self, request: Request, reason: str, now_s: float) -> None:
        self.reason = reason


class AdmissionCore:
    def __init__(self, replicas: list[LiveReplica], stack: str, max_in_flight: int) -> None:
        if not replicas:
            raise ValueError("scheduler.replicas must list at least one replica")
        if max_in_flight < 1:
            raise ValueError(
                f"scheduler.max_in_flight_per_replica must be >= 1, got {max_in_flight}"
            )
        self.replicas = {r.application: r for r in replicas}
        self.stack = STACKS.create(stack)
        self.policy = self.stack.global_policy()
        self.max_in_flight = max_in_flight
        self._owner: dict[str, LiveReplica] = {}
        self.admitted = 0
        self.rejected = 0

    def admit(self, request: Request, now_s: float) -> AdmitDecision:
        serving = [r for r in self.replicas.values() if r.serves(request.model)]
        if not serving:
            return self._reject(f"no replica serves model '{request.model}'", 0.0)
        open_ = [r for r in serving if len(r.in_flight) < self.max_in_flight]
        if not open_:
            return self._reject(
                f"overloaded: all {len(serving)} replicas of '{request.model}' have "
                f"{self.max_in_flight} requests in flight",
                retry_after_s=1.0,
            )
        before = {r.application: len(r.in_flight) for r in open_}
        rejection = _Rejection()
        self.policy.on_arrival(request, open_, rejection, now_s)
        if rejection.reason is not None:
            return self._reject(rejection.reason, 1.0)
        chosen = next(r for r in open_ if len(r.in_flight) > before[r.application])
        self._owner[request.request_id] = chosen
        self.admitted += 1
        return AdmitDecision(True, chosen, policy=self.stack.name)

    def report(self, request_id: str) -> LiveReplica | None:
        """The request finished (or failed): free its place. Unknown ids are ignored."""
        owner = self._owner.pop(request_id, None)
        if owner is not None:
            owner.in_flight.pop(request_id, None)
            owner.evicted.pop(request_id, None)
        return owner

    def take_actions(self) -> list[ReplicaAction]:
        """Evict/resume decisions of the policy for the shell to send to replicas."""
        return [a for r in self.replicas.values() for a in r.take_actions()]

    def _reject(self, reason: str, retry_after_s: float) -> AdmitDecision:
        self.rejected += 1
        return AdmitDecision(False, None, reason, retry_after_s, self.stack.name)
