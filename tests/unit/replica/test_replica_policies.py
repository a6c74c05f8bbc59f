"""Queue policies: their keys, the waiting-queue order, admission and preemption victims."""

from __future__ import annotations

import pytest

from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.core.sequence import Sequence
from services.replica.core.waiting_queue import WaitingQueue
from shared.policy.registry import UnknownNameError


def seq(h, rid="s", *, arrival=1.0, ttft=2.0, priority=2, first_token=None):
    s = Sequence(
        request=h.request(rid, 10, 5, arrival=arrival, ttft=ttft, priority=priority),
        enqueue_s=arrival,
    )
    s.first_token_s = first_token
    return s


# arrival 1.0, TTFT deadline 2.0 after it (3.0 absolute), priority 2
@pytest.mark.parametrize(
    ("policy", "now", "first_token", "key"),
    [
        ("fcfs", 2.0, None, (1.0,)),
        ("priority", 2.0, None, (2.0, 1.0)),
        ("edf", 2.0, None, (3.0, 1.0)),
        ("edf", 9.0, None, (3.0, 1.0)),
        ("oracle-edf", 2.0, None, (0.0, 3.0, 1.0)),
        ("oracle-edf", 3.0, None, (0.0, 3.0, 1.0)),  # at the deadline: still attainable
        ("oracle-edf", 3.5, None, (1.0, 3.0, 1.0)),  # past it without a token: lost
        ("oracle-edf", 3.5, 2.5, (0.0, 3.0, 1.0)),  # has its first token: keeps its place
    ],
)
def test_replica_policy_keys(h, policy, now, first_token, key):
    p = QUEUE_POLICIES.create(policy)
    assert p.key(seq(h, first_token=first_token), now) == key


@pytest.mark.parametrize(
    ("policy", "requeue"),
    [("fcfs", False), ("priority", False), ("edf", False), ("oracle-edf", True)],
)
def test_replica_policy_requeue_key(h, policy, requeue):
    p = QUEUE_POLICIES.create(policy)
    s = seq(h)
    s.key = p.key(s, 2.0)
    assert p.requeue_key(s, 2.5) is None  # nothing changed before the deadline
    new = p.requeue_key(s, 4.0)
    assert (new == (1.0, 3.0, 1.0)) if requeue else (new is None)


# x: arrival 0.0, deadline 5.0, priority 1; y: 0.1, 1.1, 2; z: 0.2, 3.2, 0
@pytest.mark.parametrize(
    ("policy", "pop_at", "order"),
    [
        ("fcfs", 0.3, ["x", "y", "z"]),
        ("priority", 0.3, ["z", "x", "y"]),
        ("edf", 0.3, ["y", "z", "x"]),
        ("edf", 2.0, ["y", "z", "x"]),  # EDF never demotes
        ("oracle-edf", 0.3, ["y", "z", "x"]),
        ("oracle-edf", 2.0, ["z", "x", "y"]),  # y's deadline passed while it waited: demoted
        ("oracle-edf", 6.0, ["y", "z", "x"]),  # all lost: EDF among the lost
    ],
)
def test_replica_waiting_queue_order(h, policy, pop_at, order):
    q = WaitingQueue(QUEUE_POLICIES.create(policy))
    for s in [
        seq(h, "x", arrival=0.0, ttft=5.0, priority=1),
        seq(h, "y", arrival=0.1, ttft=1.0, priority=2),
        seq(h, "z", arrival=0.2, ttft=3.0, priority=0),
    ]:
        q.push(s, 0.3)
    assert len(q) == 3
    popped = [q.pop(pop_at).request_id for _ in range(3)]
    assert popped == order
    assert q.pop(pop_at) is None and len(q) == 0


def test_replica_fcfs_line_is_the_order_requests_reached_the_engine(h):
    """vLLM's FCFS appends each request as the engine receives it: one a global queue held
    (arrived at the mesh first, placed here last) waits behind those placed before it."""
    q = WaitingQueue(QUEUE_POLICIES.create("fcfs"))
    placed_first = Sequence(request=h.request("short", 10, 5, arrival=0.3, ttft=2.0), enqueue_s=0.4)
    held_long = Sequence(request=h.request("long", 10, 5, arrival=0.0, ttft=10.0), enqueue_s=0.9)
    q.push(placed_first, 0.4)
    q.push(held_long, 0.9)
    assert [q.pop(1.0).request_id for _ in range(2)] == ["short", "long"]


@pytest.mark.parametrize(
    ("policy", "order"),
    [
        ("fcfs", ["r1", "r2"]),
        ("edf", ["r2", "r1"]),
        ("oracle-edf", ["r2", "r1"]),
        ("priority", ["r2", "r1"]),
    ],
)
def test_replica_admission_order(h, policy, order):
    """One seat: r0 runs; r1 (loose deadline, low priority) and r2 (tight, high) wait."""
    core = h.core(1024, queue_policy=policy, max_num_seqs=1)
    reqs = [
        h.request("r0", 10, 10, arrival=0.0),
        h.request("r1", 10, 2, arrival=0.001, ttft=100.0, priority=5),
        h.request("r2", 10, 2, arrival=0.002, ttft=50.0, priority=1),
    ]
    trace = h.drive(core, reqs)
    firsts = sorted(["r1", "r2"], key=lambda rid: trace.finished[rid].first_token_s)
    assert firsts == order
    assert trace.finished["r0"].first_token_s < trace.finished[order[0]].first_token_s


@pytest.mark.parametrize(
    ("policy", "victim"),
    [("fcfs", "b"), ("edf", "a"), ("priority", "a"), ("oracle-edf", "a")],
)
def test_replica_preemption_victim_is_highest_key(h, policy, victim):
    # a arrives first with a loose deadline and low priority; b later, tight and high priority;
    # 4 blocks of 16 cannot hold both as they grow (16 + 39 tokens each)
    core = h.core(64, queue_policy=policy, block_size_tokens=16)
    reqs = [
        h.request("a", 16, 40, arrival=0.0, ttft=100.0, priority=3),
        h.request("b", 16, 40, arrival=0.001, ttft=5.0, priority=0),
    ]
    trace = h.drive(core, reqs)
    preempted = [rid for s in trace.steps for rid in s.plan.preempted]
    assert preempted and preempted[0] == victim
    assert sorted(trace.finished) == ["a", "b"]


@pytest.mark.parametrize(("policy", "b_first"), [("edf", False), ("oracle-edf", True)])
def test_replica_urgent_head_evicts_running_work(h, policy, b_first):
    """oracle-edf lets an urgent waiting head preempt looser running work for KV room."""
    core = h.core(64, queue_policy=policy, block_size_tokens=16)
    reqs = [
        h.request("a", 40, 15, arrival=0.0, ttft=100.0),
        h.request("b", 30, 3, arrival=0.001, ttft=1.0),
    ]
    trace = h.drive(core, reqs)
    a, b = trace.finished["a"], trace.finished["b"]
    assert (b.first_token_s < a.finish_s) is b_first
    assert (a.preemptions > 0) is b_first
    assert b.preemptions == 0


def test_replica_unknown_queue_policy_lists_valid_names(h):
    with pytest.raises(UnknownNameError) as err:
        QUEUE_POLICIES.create("lifo")
    for name in ("edf", "fcfs", "oracle-edf", "priority"):
        assert name in str(err.value)
    assert "lifo" in str(err.value)
    with pytest.raises(ValueError, match="valid: edf, fcfs, oracle-edf, priority"):
        h.core(1024, queue_policy="lifo")
    assert QUEUE_POLICIES.names() == ["edf", "fcfs", "oracle-edf", "priority"]
