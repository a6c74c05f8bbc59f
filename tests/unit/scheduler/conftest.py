"""Fake instances and rejectors for router and global-policy tests (no engine behind them)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.scheduler.core.cluster_view import WorkItem
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, PrefillCoeffs, Request
from shared.domain.engine import EngineStatus


def make_profile(
    model: str = "m",
    *,
    speed: float = 1.0,
    weight_bytes: int = 10**9,
    swap_bytes_s: float = 1e10,
    kv_tokens: int = 10**6,
) -> HardwareProfile:
    """A profile whose compute coefficients are divided by `speed` (2.0 = twice as fast)."""
    return HardwareProfile(
        gpu=f"gpu-x{speed}",
        model=model,
        tensor_parallel=1,
        prefill=PrefillCoeffs(1e-4 / speed, 0.0, 0.0, 0.01 / speed),
        decode=DecodeCoeffs(1e-7 / speed, 1e-4 / speed, 0.0, 0.01 / speed),
        kv_capacity_bytes=kv_tokens * 1000,
        kv_bytes_per_token=1000,
        weight_bytes=weight_bytes,
        swap_bytes_s=swap_bytes_s,
        cold_load_bytes_s=1e9,
    )


def make_request(rid: str = "r", model: str = "m", arrival: float = 0.0) -> Request:
    return Request(rid, model, 100, 50, arrival, SLO(10.0), true_output_tokens=20)


@dataclass
class FakeInstance:
    """Satisfies services.scheduler.core.cluster_view.InstanceHandle with settable load figures."""

    name: str
    models: tuple[str, ...] = ("m",)
    speed: float = 1.0
    waiting: int = 0
    running: int = 0
    evicted: int = 0
    pending_prefill_tokens: int = 0
    outstanding_output_tokens: int = 0
    active_model: str | None = "m"
    kv_tokens: int = 10**6
    items: list[WorkItem] = field(default_factory=list)
    token_budget: int = 8192
    max_num_seqs: int = 64
    kv_used_blocks: int = 0
    submitted: list[Request] = field(default_factory=list)
    evicted_ids: list[str] = field(default_factory=list)
    resumed_ids: list[str] = field(default_factory=list)
    prewarmed: list[str] = field(default_factory=list)
    load_times_s: dict[str, float] = field(default_factory=dict)

    def work_items(self) -> list[WorkItem]:
        return list(self.items)

    @property
    def gpu(self) -> str:
        return f"gpu-x{self.speed}"

    def serves(self, model: str) -> bool:
        return model in self.models

    def profile(self, model: str) -> HardwareProfile:
        assert self.serves(model)
        return make_profile(model, speed=self.speed, kv_tokens=self.kv_tokens)

    def status(self) -> EngineStatus:
        return EngineStatus(
            active_model=self.active_model,
            waiting=self.waiting,
            running=self.running,
            evicted=self.evicted,
            kv_used_blocks=self.kv_used_blocks,
            kv_total_blocks=100,
            outstanding_output_tokens=self.outstanding_output_tokens,
            pending_prefill_tokens=self.pending_prefill_tokens,
        )

    def submit(self, request: Request, now_s: float) -> None:
        self.submitted.append(request)
        self.waiting += 1

    def evict(self, request_ids: list[str], now_s: float) -> list[str]:
        self.evicted_ids.extend(request_ids)
        return list(request_ids)

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        self.resumed_ids.extend(request_ids)
        return list(request_ids)

    def load_time_s(self, model: str) -> float:
        return 0.0 if model == self.active_model else self.load_times_s.get(model, 1.0)

    def prewarm(self, model: str) -> None:
        self.prewarmed.append(model)


@dataclass
class FakeRejector:
    rejected: list[tuple[str, str, float]] = field(default_factory=list)

    def reject(self, request: Request, reason: str, now_s: float) -> None:
        self.rejected.append((request.request_id, reason, now_s))


class Fakes:
    instance = FakeInstance
    rejector = FakeRejector
    request = staticmethod(make_request)
    profile = staticmethod(make_profile)


@pytest.fixture
def fakes() -> type[Fakes]:
    return Fakes
