"""A live replica as the scheduler's policies see it: counts from admissions and reports.

Implements services.scheduler.core.cluster_view.InstanceHandle, so the same routers and global
policies that run in the simulator place live requests. No prompt text, no network: the shell
feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from services.scheduler.core.cluster_view import WorkItem
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineStatus, SliceEntry


@dataclass(frozen=True, slots=True)
class ReplicaAction:
    """A decision the scheduler's shell must carry out on a replica (Evict / Resume RPC)."""

    application: str
    kind: Literal["evict", "resume"]
    request_ids: tuple[str, ...]


@dataclass
class LiveReplica:
    application: str
    gpu_name: str
    model: str
    profile_: HardwareProfile | None
    token_budget: int = 8192
    max_num_seqs: int = 256
    """Requests the replica's engine runs at once; beyond it, admitted requests wait there."""
    in_flight: dict[str, Request] = field(default_factory=dict)
    evicted: dict[str, Request] = field(default_factory=dict)
    pending: list[ReplicaAction] = field(default_factory=list)
    submitted: list[Request] = field(default_factory=list)
    placed_s: dict[str, float] = field(default_factory=dict)
    """When each in-flight or evicted request was placed here (its admission lease starts)."""
    healthy: bool = True
    """False while the replica does not answer Status: nothing is placed or pulled there."""
    slice_tokens: dict[str, int] = field(default_factory=dict)
    """Slice-level serving: each batch member's token budget for its current slice here."""
    engines: int = 1
    """Engines behind this application: a replica pool's running replicas (autoscaled by Serve;
    services/replica/pool.py). Its admission limit is that many times one replica's."""

    @property
    def name(self) -> str:
        return self.application

    @property
    def gpu(self) -> str:
        return self.gpu_name

    def serves(self, model: str) -> bool:
        return model == self.model

    def profile(self, model: str) -> HardwareProfile:
        if self.profile_ is None:
            raise ValueError(
                f"no hardware profile for {self.model} on {self.gpu_name} (replica "
                f"{self.application}): profile it, or use a stack that does not need one"
            )
        return self.profile_

    def load_time_s(self, model: str) -> float:
        return 0.0 if model == self.model else float("inf")

    def prewarm(self, model: str) -> None:
        """Live replicas serve one model each (no swapping yet): nothing to stage."""

    def status(self) -> EngineStatus:
        n = len(self.in_flight)
        return EngineStatus(
            active_model=self.model,
            waiting=max(0, n - self.max_num_seqs),
            running=min(n, self.max_num_seqs),
            evicted=len(self.evicted),
            kv_used_blocks=0,
            kv_total_blocks=0,
            outstanding_output_tokens=sum(r.max_tokens for r in self.in_flight.values()),
            pending_prefill_tokens=sum(r.input_tokens for r in self.in_flight.values()),
        )

    def work_items(self) -> list[WorkItem]:
        return [
            WorkItem(r.ttft_deadline_abs_s, True, r.input_tokens, r.input_tokens, r.max_tokens)
            for r in self.in_flight.values()
        ]

    def submit(self, request: Request, now_s: float) -> None:
        self.in_flight[request.request_id] = request
        self.placed_s[request.request_id] = now_s
        self.submitted.append(request)

    def submit_batch(self, entries: list[SliceEntry], iterations: int, now_s: float) -> None:
        """A pre-formed batch for one slice (SCLS / SLO-ODBS on a continuous engine): its members
        go here together, each capped at `iterations` output tokens; the ingress streams them and
        hands an unfinished one back at its slice end (AdmissionCore.resume_slice)."""
        for e in entries:
            self.submit(e.request, now_s)
            self.slice_tokens[e.request.request_id] = iterations

    def forget(self, request_id: str) -> Request | None:
        """Drop a finished (or abandoned) request from this replica's books."""
        self.placed_s.pop(request_id, None)
        self.slice_tokens.pop(request_id, None)
        return self.in_flight.pop(request_id, None) or self.evicted.pop(request_id, None)

    def unheld(self, held: set[str], now_s: float, lease_s: float) -> list[str]:
        """Requests placed here more than `lease_s` ago that the replica does not hold: their
        caller never started (or already ended) the stream, and no report will come."""
        return [
            rid
            for rid in (*self.in_flight, *self.evicted)
            if rid not in held and now_s - self.placed_s.get(rid, now_s) > lease_s
        ]

    def take_submitted(self) -> list[Request]:
        """Requests placed here since the last call (the core turns them into dispatches)."""
        out, self.submitted = self.submitted, []
        return out

    def evict(self, request_ids: list[str], now_s: float) -> list[str]:
        """Take in-flight requests out of service: recorded here, executed by the shell."""
        ids = [r for r in dict.fromkeys(request_ids) if r in self.in_flight]
        for rid in ids:
            self.evicted[rid] = self.in_flight.pop(rid)
        if ids:
            self.pending.append(ReplicaAction(self.application, "evict", tuple(ids)))
        return ids

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        """Put evicted requests back in service (same split: record here, execute in the shell)."""
        ids = [r for r in dict.fromkeys(request_ids) if r in self.evicted]
        for rid in ids:
            self.in_flight[rid] = self.evicted.pop(rid)
        if ids:
            self.pending.append(ReplicaAction(self.application, "resume", tuple(ids)))
        return ids

    def take_actions(self) -> list[ReplicaAction]:
        """The decisions not yet carried out, oldest first; the caller now owns them."""
        actions, self.pending = self.pending, []
        return actions
