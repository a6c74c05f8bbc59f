"""Preemption under KV pressure: recompute re-prefills, swap moves KV to the host and back."""

from __future__ import annotations

import pytest

from services.replica.core.outputs import StepKind

# 4 blocks of 16 tokens; each request needs up to 16 + 39 = 55 tokens (4 blocks): both cannot fit
CAP = 64
IN, OUT = 16, 40


def two_requests(h):
    return [h.request("a", IN, OUT, arrival=0.0), h.request("b", IN, OUT, arrival=0.001)]


def run(h, **config):
    profile = h.profile(CAP, swap_bytes_s=config.pop("swap_bytes_s", 1e10))
    core = h.core(profiles={"m": profile}, block_size_tokens=16, **config)
    trace = h.drive(core, two_requests(h))
    assert sorted(trace.finished) == ["a", "b"]
    for seq in trace.finished.values():
        assert seq.num_output_tokens == OUT
    return core, profile, trace


def assert_durations(h, profile, trace):
    """Every step lasts its profiled compute time plus the PCIe time of what it swapped."""
    for step in trace.steps:
        assert step.plan.kind is StepKind.EXECUTE
        swapped = step.plan.swapped_in_tokens + step.plan.swapped_out_tokens
        want = h.step_time(profile, step.chunks) + profile.swap_time_s(swapped)
        assert step.plan.duration_s == pytest.approx(want, rel=1e-12)


def first_step_after_preemption(trace, rid):
    k = next(i for i, s in enumerate(trace.steps) if rid in s.plan.preempted)
    later = [s for s in trace.steps[k + 1 :] if any(c.rid == rid for c in s.chunks)]
    return trace.steps[k], later[0]


def test_replica_recompute_preemption_reprefills(h):
    core, profile, trace = run(h, preemption_mode="recompute")
    assert core.preemptions > 0
    assert trace.finished["b"].preemptions > 0  # FCFS: the latest arrival is the victim
    assert trace.finished["a"].preemptions == 0
    preempting, resumed = first_step_after_preemption(trace, "b")
    assert preempting.plan.swapped_out_tokens == 0
    chunk = next(c for c in resumed.chunks if c.rid == "b")
    # all of the prompt and the tokens generated so far are computed again
    assert chunk.computed_before == 0
    assert chunk.outputs_before > 0
    assert chunk.num_tokens == IN + chunk.outputs_before
    assert resumed.plan.swapped_in_tokens == 0
    assert resumed.plan.duration_s >= profile.prefill_time_s(1, chunk.num_tokens)
    assert_durations(h, profile, trace)
    assert sum(s.plan.swapped_in_tokens + s.plan.swapped_out_tokens for s in trace.steps) == 0


def test_replica_swap_preemption_moves_kv_to_host_and_back(h):
    core, profile, trace = run(h, preemption_mode="swap", host_swap_bytes=10**9)
    assert core.preemptions > 0
    preempting, resumed = first_step_after_preemption(trace, "b")
    assert preempting.plan.swapped_out_tokens > 0
    assert preempting.plan.duration_s > h.step_time(profile, preempting.chunks)
    assert resumed.plan.swapped_in_tokens == preempting.plan.swapped_out_tokens
    chunk = next(c for c in resumed.chunks if c.rid == "b")
    assert chunk.computed_before == resumed.plan.swapped_in_tokens  # KV restored, not recomputed
    assert chunk.num_tokens == 1
    assert_durations(h, profile, trace)
    assert core.planner.state.host.used_bytes == 0


@pytest.mark.parametrize(
    ("swap_bytes_s", "expect_swap"),
    [
        pytest.param(1e12, True, id="fast-pcie-swaps"),
        pytest.param(1e3, False, id="slow-pcie-recomputes"),
    ],
)
def test_replica_auto_preemption_picks_the_cheaper(h, swap_bytes_s, expect_swap):
    core, profile, trace = run(
        h, preemption_mode="auto", host_swap_bytes=10**9, swap_bytes_s=swap_bytes_s
    )
    assert core.preemptions > 0
    swapped_out = sum(s.plan.swapped_out_tokens for s in trace.steps)
    assert (swapped_out > 0) is expect_swap
    assert_durations(h, profile, trace)


@pytest.mark.parametrize("host_tokens", [0, 10])
def test_replica_swap_falls_back_to_recompute_when_host_is_full(h, host_tokens):
    core, profile, trace = run(h, preemption_mode="swap", host_swap_bytes=host_tokens * h.KVB)
    assert core.preemptions > 0
    assert sum(s.plan.swapped_out_tokens for s in trace.steps) == 0
    _, resumed = first_step_after_preemption(trace, "b")
    chunk = next(c for c in resumed.chunks if c.rid == "b")
    assert chunk.computed_before == 0 and chunk.num_tokens > 1
    assert_durations(h, profile, trace)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_replica_no_preemption_when_everything_fits(h, mode):
    core = h.core(10_000, preemption_mode=mode)
    trace = h.drive(core, two_requests(h))
    assert core.preemptions == 0
    assert all(not s.plan.preempted for s in trace.steps)
    assert sorted(trace.finished) == ["a", "b"]


def test_replica_many_preemptions_every_sequence_finishes(h):
    reqs = [h.request(f"r{k}", 10 + k, 30 + 3 * k, arrival=0.001 * k) for k in range(8)]
    core = h.core(96, block_size_tokens=16, max_num_batched_tokens=32)
    trace = h.drive(core, reqs)
    assert core.preemptions >= 3
    assert sorted(trace.finished) == sorted(r.request_id for r in reqs)
    for r in reqs:
        assert trace.finished[r.request_id].num_output_tokens == r.true_output_tokens
