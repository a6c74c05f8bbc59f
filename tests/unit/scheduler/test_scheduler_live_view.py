"""The live scheduler core: admission decisions and the evict/resume decisions it records."""

from __future__ import annotations

import pytest

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica, ReplicaAction
from services.scheduler.core.output import ClusterOutput, ModelSwap
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def req(rid: str, model: str = "m") -> Request:
    return Request(rid, model, 10, 20, 0.0, SLO(5.0))


def core(n: int = 2, limit: int = 2, policy: str = "round-robin") -> AdmissionCore:
    return AdmissionCore(
        [LiveReplica(f"replica-{k}", "cpu", "m", None) for k in range(n)],
        create_global_policy(policy),
        policy,
        limit,
    )


def test_scheduler_live_admits_round_robin_then_rejects_with_retry_after() -> None:
    c = core(n=2, limit=1)
    first, second, third = (c.admit(req(f"r{k}"), 0.0) for k in range(3))
    assert first.admitted and second.admitted
    assert {first.replica.application, second.replica.application} == {"replica-0", "replica-1"}
    assert not third.admitted and third.retry_after_s > 0 and "overloaded" in third.reason
    c.report("r0")
    assert c.admit(req("r3"), 0.0).admitted  # the report freed a place


@pytest.mark.parametrize(("model", "reason"), [("other", "no replica serves model 'other'")])
def test_scheduler_live_rejects_unserved_model(model: str, reason: str) -> None:
    d = core().admit(req("x", model), 0.0)
    assert not d.admitted and d.reason == reason


def test_scheduler_live_evict_and_resume_become_replica_actions() -> None:
    c = core(n=1, limit=4)
    for k in range(3):
        c.admit(req(f"r{k}"), 0.0)
    rep = c.replicas["replica-0"]
    assert rep.book_eviction(["r1", "r1", "nope"]) == ["r1"]  # duplicates and unknown ids dropped
    assert rep.status().running == 2 and rep.status().evicted == 1
    assert rep.book_resume(["r1", "r2"]) == ["r1"]  # r2 was never evicted
    assert c.take_actions() == [
        ReplicaAction("replica-0", "evict", ("r1",)),
        ReplicaAction("replica-0", "resume", ("r1",)),
    ]
    assert c.take_actions() == []  # handed over once
    rep.book_eviction(["r0"])
    c.report("r0")  # an evicted request that ends is forgotten too
    assert rep.status().evicted == 0 and rep.status().running == 2


def test_scheduler_live_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        AdmissionCore([], create_global_policy("round-robin"), "round-robin", 1)
    with pytest.raises(ValueError, match="max_in_flight_per_replica must be >= 1"):
        core(limit=0)


def test_scheduler_live_qlm_queues_then_dispatches_when_a_report_frees_room() -> None:
    reps = [LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)]
    c = AdmissionCore(reps, create_global_policy("qlm"), "qlm", max_in_flight=8)
    first = c.admit(req("r0"), 0.0)
    assert first.admitted and not first.queued and first.replica is reps[0]
    # qlm's default engine window (4 waiting) fills, then requests stay in its global queue
    decisions = [c.admit(req(f"r{k}"), 0.1 * k) for k in range(1, 8)]
    assert all(d.admitted for d in decisions)
    queued = [f"r{k}" for k, d in zip(range(1, 8), decisions, strict=True) if d.queued]
    assert queued and c.queued == len(queued)
    c.take_dispatched()
    c.report("r0", output_tokens=5, now_s=1.0)
    released = [r.request_id for r, rep in c.take_dispatched()]
    assert released == queued[:1] and c.queued == len(queued) - 1


def test_scheduler_live_qlm_cancelled_queued_request_leaves_the_queue() -> None:
    c = AdmissionCore(
        [LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)],
        create_global_policy("qlm"),
        "qlm",
        8,
    )
    for k in range(8):
        c.admit(req(f"r{k}"), 0.0)
    before = c.queued
    c.report("r7", 0, 0.5)  # the client went away before a replica pulled it
    assert c.queued == before - 1
    assert "r7" not in {r.request_id for r, _ in c.take_dispatched()}


def test_scheduler_live_a_swap_decision_becomes_a_swap_model_action() -> None:
    c = AdmissionCore(
        [LiveReplica("replica-0", "cpu", "m", None, swap_profiles={"m2": None})],
        create_global_policy("round-robin"),
        "round-robin",
        4,
    )
    c._book(ClusterOutput(0.0, swaps=(ModelSwap(0, "replica-0", "m2", "load"),)))
    c._book(ClusterOutput(0.0, swaps=(ModelSwap(0, "replica-0", "m2", "prewarm"),)))
    assert c.take_actions() == [ReplicaAction("replica-0", "swap", (), "m2")]  # prewarm: none
    with pytest.raises(ValueError, match="does not serve model 'other'"):
        c.replicas["replica-0"].book_swap("other")
