"""Fake instances and decision sinks for router and global-policy tests (no engine behind them).

Policies only read instances and write decisions; `FakeOut` is a `Decisions` that also carries
each decision out on the fake instances at once (the tests' applier), so a test reads what a
policy did off the fakes (`submitted`, `evicted_ids`, ...) and off `rejected`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.scheduler.core.cluster_view import PendingChange, RequestState, WorkItem
from services.scheduler.core.decisions import Decisions
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


_FAKES: dict[str, FakeInstance] = {}
"""The fake instances by name, the latest of each name (FakeOut applies decisions to them)."""


@dataclass
class FakeInstance:
    """Satisfies services.scheduler.core.cluster_view.InstanceView with settable load figures;
    FakeOut applies decisions to it (submit, evict, resume, prewarm: the tests' applier)."""

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
    loaded_adapters: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _FAKES[self.name] = self

    def work_items(self) -> list[WorkItem]:
        return list(self.items)

    def holds(self, request_id: str) -> RequestState | None:
        return (
            "evicted"
            if self.evicted_ids.count(request_id) > self.resumed_ids.count(request_id)
            else "running"
        )

    def status_after(self, change: PendingChange) -> EngineStatus:
        st = self.status()
        return EngineStatus(
            st.active_model,
            st.waiting + change.added,
            st.running,
            st.evicted,
            st.kv_used_blocks,
            st.kv_total_blocks,
            st.outstanding_output_tokens,
            st.pending_prefill_tokens,
            loaded_adapters=st.loaded_adapters,
        )

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
            loaded_adapters=self.loaded_adapters,
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


class FakeOut(Decisions):
    """Decisions carried out on the fake instances at once; rejections listed in `rejected`."""

    def __init__(self) -> None:
        super().__init__()
        self.rejected: list[tuple[str, str, float]] = []

    def place(self, request: Request, instance: object, leased: bool = False) -> None:
        super().place(request, instance, leased)  # type: ignore[arg-type]
        _fake(instance).submit(request, self.now_s)

    def place_batch(self, instance: object, entries: object, iterations: int) -> None:
        members = list(entries)  # type: ignore[call-overload]
        super().place_batch(instance, members, iterations)  # type: ignore[arg-type]
        _fake(instance).batches.append((members, iterations, self.now_s))  # type: ignore[attr-defined]

    def reject(self, request: Request, reason: str, now_s: float | None = None, **kw) -> None:
        super().reject(request, reason, now_s, **kw)
        self.rejected.append((request.request_id, reason, now_s if now_s is not None else 0.0))

    def evict(self, instance, request_ids) -> list[str]:  # type: ignore[no-untyped-def]
        done = super().evict(instance, request_ids)
        _fake(instance).evict(done, self.now_s)
        return done

    def resume(self, instance, request_ids) -> list[str]:  # type: ignore[no-untyped-def]
        done = super().resume(instance, request_ids)
        _fake(instance).resume(done, self.now_s)
        return done

    def prewarm(self, instance: object, model: str) -> None:
        super().prewarm(instance, model)  # type: ignore[arg-type]
        _fake(instance).prewarm(model)


def _fake(instance: object) -> FakeInstance:
    return _FAKES[instance if isinstance(instance, str) else instance.name]  # type: ignore[attr-defined]


class Fakes:
    instance = FakeInstance
    rejector = FakeOut
    request = staticmethod(make_request)
    profile = staticmethod(make_profile)


@pytest.fixture
def fakes() -> type[Fakes]:
    return Fakes
