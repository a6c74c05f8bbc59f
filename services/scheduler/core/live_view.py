"""A live replica as the scheduler's policies see it: counts from admissions and reports.

Implements services.scheduler.cluster_view.InstanceHandle, so the same routers and global policies
that run in the simulator place live requests. No prompt text, no network: the shell feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.replica.core.engine_core import EngineStatus
from services.scheduler.cluster_view import WorkItem
from shared.domain import HardwareProfile, Request


@dataclass
class LiveReplica:
    application: str
    gpu_name: str
    model: str
    profile_: HardwareProfile | None
    token_budget: int = 8192
    in_flight: dict[str, Request] = field(default_factory=dict)

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

    def status(self) -> EngineStatus:
        return EngineStatus(
            active_model=self.model,
            waiting=0,
            running=len(self.in_flight),
            evicted=0,
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

    def evict(self, request_ids: list[str], now_s: float) -> list[str]:
        return []  # eviction from the live scheduler arrives with QLM (issue 4)

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        return []
