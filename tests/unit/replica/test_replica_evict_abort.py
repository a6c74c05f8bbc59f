"""Explicit evict/resume (QLM's eviction LSO) and abort on the engine core."""

from __future__ import annotations

import pytest

from services.replica.core.outputs import StepKind
from services.replica.core.sequence import KVLocation, SeqStatus


def after_steps(n):
    return lambda trace: len(trace.steps) >= n


def start_two(h, **config):
    """A core with `a` and `b` both running after a few steps."""
    core = h.core(1024, block_size_tokens=16, **config)
    reqs = [h.request("a", 40, 20), h.request("b", 30, 25)]
    trace = h.drive(core, reqs, stop=after_steps(3))
    assert {s.request_id for s in core.planner.state.running} == {"a", "b"}
    return core, trace.end_s


# ---- evict / resume --------------------------------------------------------------------------
@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_replica_evicted_request_waits_for_resume(h, preemption):
    core, t = start_two(h, preemption_mode=preemption, host_swap_bytes=10**9)
    state = core.planner.state
    a = state.seqs["a"]
    used, a_blocks, outputs = state.pool.used, a.gpu_blocks, a.num_output_tokens
    assert a_blocks > 0

    assert core.evict(["a"]) == ["a"]
    assert a.status is SeqStatus.EVICTED
    assert state.pool.used == used - a_blocks and a.gpu_blocks == 0
    st = core.status()
    assert (st.running, st.waiting, st.evicted) == (1, 0, 1)
    if preemption == "swap":
        assert a.kv is KVLocation.CPU and state.host.used_bytes == a.num_computed_tokens * h.KVB
    else:
        assert a.kv is KVLocation.NONE and state.host.used_bytes == 0

    trace = h.drive(core, t=t)  # runs until idle: only b is served
    assert list(trace.finished) == ["b"]
    assert not trace.steps_with("a")
    assert a.num_output_tokens == outputs
    assert state.evicted == {"a": a} and not core.has_work

    assert core.resume(["a"], trace.end_s) == ["a"]
    trace2 = h.drive(core, t=trace.end_s)
    assert list(trace2.finished) == ["a"]
    assert a.num_output_tokens == 20
    assert trace2.emitted["a"] == 20 - outputs
    swapped_in = sum(s.plan.swapped_in_tokens for s in trace2.steps)
    assert (swapped_in > 0) is (preemption == "swap")
    assert state.pool.used == 0 and state.host.used_bytes == 0 and not state.evicted


def test_replica_evict_waiting_request_then_resume(h):
    core = h.core(1024, max_num_seqs=1)
    trace = h.drive(core, [h.request("a", 10, 5), h.request("b", 10, 5)], stop=after_steps(1))
    assert core.planner.state.seqs["b"].status is SeqStatus.WAITING
    assert core.evict(["b"]) == ["b"]
    assert core.status().waiting == 0
    t1 = h.drive(core, t=trace.end_s)
    assert list(t1.finished) == ["a"] and not t1.steps_with("b")
    assert core.resume(["b"], t1.end_s) == ["b"]
    t2 = h.drive(core, t=t1.end_s)
    assert list(t2.finished) == ["b"] and t2.finished["b"].num_output_tokens == 5


@pytest.mark.parametrize(
    "ids",
    [
        pytest.param(["nope"], id="unknown"),
        pytest.param(["done"], id="finished"),
        pytest.param(["gone"], id="aborted"),
        pytest.param([], id="empty"),
    ],
)
def test_replica_evict_of_unknown_or_finished_is_noop(h, ids):
    core = h.core(1024)
    h.drive(core, [h.request("done", 5, 2)])
    core.add_request(h.request("gone", 5, 2), 1.0)
    assert core.abort("gone")
    core.add_request(h.request("live", 5, 3), 1.0)
    before = core.status()
    assert core.evict(ids) == []
    assert core.resume(ids, 1.0) == []
    assert core.status() == before
    assert core.preemptions == 0


def test_replica_evict_twice_and_resume_not_evicted_are_noops(h):
    core, t = start_two(h)
    assert core.evict(["a", "a"]) == ["a"]
    assert core.evict(["a"]) == []
    assert core.resume(["b"], t) == []  # running, not evicted
    assert core.resume(["a", "a"], t) == ["a"]
    assert core.status().waiting == 1


def test_replica_waiting_sequences_listed_once_after_evict_resume(h):
    core = h.core(1024, max_num_seqs=1)
    h.drive(core, [h.request("a", 10, 5), h.request("b", 10, 5)], stop=after_steps(1))
    core.evict(["b"])
    core.resume(["b"], 0.5)
    waiting = core.planner.state.waiting
    assert len(waiting) == 1
    assert [s.request_id for s in waiting.sequences()] == ["b"]


def test_replica_static_evict_of_done_sequence_does_not_overgenerate(h):
    core = h.core(1024, mode="static")
    trace = h.drive(core, [h.request("a", 10, 2), h.request("b", 10, 10)], stop=after_steps(2))
    a = core.planner.state.seqs["a"]
    assert a.is_done and a.status is SeqStatus.RUNNING  # waiting for its batch to end
    core.evict(["a"])
    core.resume(["a"], trace.end_s)
    rest = h.drive(core, t=trace.end_s, check=False)
    assert a.num_output_tokens == 2
    assert rest.emitted["a"] == 0


# ---- abort -----------------------------------------------------------------------------------
def test_replica_abort_running_frees_blocks_at_once(h):
    core, t = start_two(h)
    state = core.planner.state
    a, b = state.seqs["a"], state.seqs["b"]
    out_before = core.status().outstanding_output_tokens
    assert core.abort("a") is True
    assert a.status is SeqStatus.ABORTED and a.gpu_blocks == 0
    assert state.pool.used == b.gpu_blocks
    st = core.status()
    assert (st.running, st.waiting) == (1, 0)
    assert st.outstanding_output_tokens == out_before - a.remaining_output_tokens
    trace = h.drive(core, t=t)
    assert list(trace.finished) == ["b"] and not trace.steps_with("a")
    assert core.status().outstanding_output_tokens == 0


def test_replica_abort_waiting_is_never_scheduled(h):
    core = h.core(1024, max_num_seqs=1)
    trace = h.drive(core, [h.request("a", 10, 5), h.request("b", 10, 5)], stop=after_steps(1))
    assert core.abort("b") is True
    assert core.status().waiting == 0
    rest = h.drive(core, t=trace.end_s)
    assert list(rest.finished) == ["a"]
    assert not rest.steps_with("b") and not trace.steps_with("b")


def test_replica_abort_during_a_step_drops_its_output(h):
    core = h.core(1024)
    core.add_request(h.request("a", 10, 5), 0.0)
    plan = core.schedule(0.0)
    assert plan.kind is StepKind.EXECUTE
    assert core.abort("a")
    result = core.update(plan)
    assert result.emitted == [] and result.finished == []
    assert core.planner.state.pool.used == 0 and core.schedule(plan.end_s).kind is StepKind.IDLE


def test_replica_abort_evicted_and_swapped_releases_host(h):
    core, _ = start_two(h, preemption_mode="swap", host_swap_bytes=10**9)
    core.evict(["a"])
    state = core.planner.state
    assert state.host.used_bytes > 0
    assert core.abort("a") is True
    assert state.host.used_bytes == 0
    assert not state.evicted and core.status().evicted == 0


@pytest.mark.parametrize("rid", ["nope", "done", "twice"])
def test_replica_abort_unknown_or_finished_returns_false(h, rid):
    core = h.core(1024)
    h.drive(core, [h.request("done", 5, 2)])
    core.add_request(h.request("twice", 5, 2), 1.0)
    core.abort("twice")
    assert core.abort(rid) is False
