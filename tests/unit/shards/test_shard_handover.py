"""A replica one scheduler shard hands over to another (shard ownership moved, the replica
runs on) in the pure admission core: what it runs for this shard keeps its seats there, and
nowhere else, until its reports come; arrivals get every seat of the replicas still owned.

Before handover had its own event, a shard treated it as a replica lost: QLM queued the
requests running there again and placed them on the shard's other replica, where they took
seats they never used (they ran on, on the replica handed over), and the next arrivals were
refused `replicas-full` with the seats in fact free.
"""

from __future__ import annotations

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request

LIMIT = 4


def _req(rid: str, now_s: float = 0.0) -> Request:
    return Request(rid, "m", 10, 20, now_s, SLO(20.0))


def _shard() -> tuple[AdmissionCore, LiveReplica, LiveReplica]:
    """A shard that owns two replicas of model m and runs two requests on the second."""
    ours, theirs = (LiveReplica(f"replica-{i}", "cpu", "m", None, max_num_seqs=8) for i in (0, 1))
    core = AdmissionCore([ours, theirs], create_global_policy("qlm"), "qlm", LIMIT)
    core.set_health("replica-0", False, 0.0)  # so that both go to replica-1
    for k in range(2):
        assert core.admit(_req(f"run{k}"), 0.0).replica is theirs
    core.set_health("replica-0", True, 0.5)
    core.take_dispatched()
    return core, ours, theirs


def test_requests_on_a_replica_handed_over_keep_their_seats_there_only() -> None:
    core, ours, theirs = _shard()
    assert core.hand_over("replica-1", 1.0)
    assert not theirs.healthy and not core.hand_over("replica-1", 1.0)  # once
    decisions = [core.admit(_req(f"new{k}", 1.1), 1.1) for k in range(LIMIT + 1)]
    assert [d.replica for d in decisions[:LIMIT]] == [ours] * LIMIT  # every seat of replica-0
    assert decisions[LIMIT].drop_reason == "replicas-full"  # and then it is full
    assert set(ours.in_flight) == {f"new{k}" for k in range(LIMIT)}
    assert set(theirs.in_flight) == {"run0", "run1"}
    assert core.take_actions() == []  # nothing to evict, resume or swap


def test_their_reports_free_their_seats_on_the_replica_handed_over() -> None:
    core, ours, theirs = _shard()
    core.hand_over("replica-1", 1.0)
    core.admit(_req("new0", 1.1), 1.1)
    assert [r.request_id for r, _ in core.take_dispatched()] == ["new0"]
    for k in range(2):
        assert core.report(f"run{k}", 16, 2.0) is theirs
    assert theirs.in_flight == {} and set(ours.in_flight) == {"new0"}
    assert core.take_dispatched() == [] and core.queued == 0


def test_a_replica_handed_back_takes_work_again_once_it_answers() -> None:
    core, _, theirs = _shard()
    core.hand_over("replica-1", 1.0)
    assert core.record_probe("replica-1", True, 2.0)  # ours again: its first answer
    core.report("run0", 16, 2.1)
    core.report("run1", 16, 2.1)
    decisions = [core.admit(_req(f"new{k}", 3.0), 3.0) for k in range(2 * LIMIT)]
    assert any(d.replica is theirs for d in decisions)
