"""Helpers for driving a SimEngineCore by hand on a small, hand-made hardware profile.

Engines get the planner their EngineConfig asks for (planner_factory.make_planner); the requests,
queues and KV live in that planner's state (`core.planner.state`).

The profile's KV capacity is a chosen number of tokens (kv_capacity_bytes = N · KVB), so KV
pressure, preemption and swapping are easy to force. `drive` runs a core to completion (feeding
arrivals at their times), snapshots every step and checks the engine invariants after each one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind, StepPlan
from services.replica.core.planner_factory import make_planner
from services.replica.core.sequence import KVLocation, SeqStatus, Sequence
from shared.domain import SLO, DecodeCoeffs, HardwareProfile, PrefillCoeffs, Request
from shared.domain.engine import EngineConfig

KVB = 1000
"""KV bytes per token of every test profile."""
PREFILL = PrefillCoeffs(1e-4, 0.0, 0.0, 0.01)
DECODE = DecodeCoeffs(1e-7, 1e-4, 0.0, 0.01)


def make_profile(
    capacity_tokens: int = 1024,
    *,
    model: str = "m",
    weight_bytes: int = 10**9,
    swap_bytes_s: float = 1e10,
    cold_load_bytes_s: float = 1e9,
    prefill: PrefillCoeffs = PREFILL,
    decode: DecodeCoeffs = DECODE,
) -> HardwareProfile:
    return HardwareProfile(
        gpu="test-gpu",
        model=model,
        tensor_parallel=1,
        prefill=prefill,
        decode=decode,
        kv_capacity_bytes=capacity_tokens * KVB,
        kv_bytes_per_token=KVB,
        weight_bytes=weight_bytes,
        swap_bytes_s=swap_bytes_s,
        cold_load_bytes_s=cold_load_bytes_s,
    )


def make_request(
    rid: str,
    input_tokens: int,
    output_tokens: int,
    *,
    arrival: float = 0.0,
    max_tokens: int | None = None,
    ttft: float = 10.0,
    model: str = "m",
    priority: int = 0,
) -> Request:
    return Request(
        request_id=rid,
        model=model,
        input_tokens=input_tokens,
        max_tokens=max_tokens if max_tokens is not None else output_tokens,
        arrival_s=arrival,
        slo=SLO(ttft_deadline_s=ttft),
        true_output_tokens=output_tokens,
        priority=priority,
    )


def make_core(
    capacity_tokens: int = 1024,
    *,
    profiles: dict[str, HardwareProfile] | None = None,
    active: str | None = "m",
    **config: Any,
) -> SimEngineCore:
    profs = profiles if profiles is not None else {"m": make_profile(capacity_tokens)}
    cfg = EngineConfig(**config)
    return SimEngineCore("test", profs, cfg, make_planner(cfg, profs), active)


@dataclass(frozen=True, slots=True)
class ChunkSnap:
    """A scheduled chunk as it stood when the step was planned (sequences mutate later)."""

    rid: str
    num_tokens: int
    computed_before: int
    outputs_before: int


@dataclass(slots=True)
class StepRecord:
    plan: StepPlan
    chunks: list[ChunkSnap]
    emitted: list[str]
    finished: list[str]


@dataclass
class Trace:
    steps: list[StepRecord] = field(default_factory=list)
    finished: dict[str, Sequence] = field(default_factory=dict)
    emitted: Counter[str] = field(default_factory=Counter)
    end_s: float = 0.0

    def plans(self, kind: StepKind | None = None) -> list[StepPlan]:
        return [s.plan for s in self.steps if kind is None or s.plan.kind is kind]

    def steps_with(self, rid: str) -> list[StepRecord]:
        return [s for s in self.steps if any(c.rid == rid for c in s.chunks)]


def check_invariants(core: SimEngineCore) -> None:
    """What must hold between any two steps of any engine core."""
    state = core.planner.state
    pool, host = state.pool, state.host
    assert 0 <= pool.used <= pool.num_blocks
    assert pool.used == sum(s.gpu_blocks for s in state.running)
    assert len(state.running) <= core.config.max_num_seqs
    for s in state.running:
        assert s.status is SeqStatus.RUNNING
    for s in state.seqs.values():
        if s.status is not SeqStatus.RUNNING:
            assert s.gpu_blocks == 0, f"{s.request_id} holds blocks while {s.status}"
        assert 0 <= s.num_output_tokens <= s.target_output_tokens
        assert 0 <= s.num_computed_tokens <= s.num_tokens
    assert 0 <= host.used_bytes <= host.capacity_bytes
    on_host = [s for s in state.seqs.values() if s.kv is KVLocation.CPU]
    assert host.used_bytes == sum(s.cpu_tokens * KVB for s in on_host)
    st = core.status()
    live = list(state.seqs.values())
    assert st.outstanding_output_tokens == sum(s.remaining_output_tokens for s in live)
    assert st.running == len(state.running)
    assert st.evicted == len(state.evicted)
    assert st.waiting + st.running + st.evicted == len(live)
    assert st.kv_used_blocks == pool.used


StepHook = Callable[[SimEngineCore, float, int], None]


def drive(
    core: SimEngineCore,
    requests: Iterable[Request] = (),
    *,
    t: float = 0.0,
    check: bool = True,
    hook: StepHook | None = None,
    max_steps: int = 100_000,
    stop: Callable[[Trace], bool] | None = None,
) -> Trace:
    """Run `core` until it idles with no arrivals left (or `stop(trace)` says so).

    Requests are added at their arrival times (between steps, as the simulator does);
    `hook(core, now, step_index)` runs after each step's update, e.g. to evict or abort.
    """
    pending = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    trace = Trace()
    i = 0
    for n in range(max_steps):
        while i < len(pending) and pending[i].arrival_s <= t:
            core.add_request(pending[i], pending[i].arrival_s)
            i += 1
        plan = core.schedule(t)
        if plan.kind is StepKind.IDLE:
            if i < len(pending):
                t = pending[i].arrival_s
                continue
            break
        assert plan.start_s == t
        assert plan.duration_s > 0
        snaps = [
            ChunkSnap(
                c.seq.request_id, c.num_tokens, c.seq.num_computed_tokens, c.seq.num_output_tokens
            )
            for c in plan.chunks
        ]
        result = core.update(plan)
        assert result.end_s == plan.end_s
        rec = StepRecord(
            plan,
            snaps,
            [s.request_id for s in result.emitted],
            [s.request_id for s in result.finished],
        )
        trace.steps.append(rec)
        trace.emitted.update(rec.emitted)
        for s in result.finished:
            assert s.request_id not in trace.finished, f"{s.request_id} finished twice"
            trace.finished[s.request_id] = s
        t = plan.end_s
        if check:
            check_invariants(core)
        if hook is not None:
            hook(core, t, n)
            if check:
                check_invariants(core)
        if stop is not None and stop(trace):
            break
    else:
        raise AssertionError(f"core did not drain in {max_steps} steps")
    trace.end_s = t
    return trace


def expected_step_time(profile: HardwareProfile, chunks: list[ChunkSnap]) -> float:
    """A continuous step's duration, recomputed independently from the chunk snapshots."""
    p_tokens = p_seqs = p_max = d_seqs = d_ctx = 0
    for c in chunks:
        if c.num_tokens == 1 and c.outputs_before > 0:
            d_seqs += 1
            d_ctx += c.computed_before + 1
        else:
            p_tokens += c.num_tokens
            p_seqs += 1
            p_max = max(p_max, c.computed_before + c.num_tokens)
    return profile.step_time_s(p_tokens, p_seqs, p_max, d_seqs, d_ctx)


class Harness:
    """The helpers above, handed to tests through the `h` fixture."""

    KVB = KVB
    profile = staticmethod(make_profile)
    request = staticmethod(make_request)
    core = staticmethod(make_core)
    drive = staticmethod(drive)
    check = staticmethod(check_invariants)
    step_time = staticmethod(expected_step_time)


@pytest.fixture
def h() -> type[Harness]:
    return Harness
