"""Admission that always answers: leases reconciled with the replicas, queue waits bounded by the
TTFT deadline, and rejection at arrival when the queue cannot drain in time.

The first test reproduces a stuck-mesh bug: admissions whose caller went away
between the scheduler's answer and the replica stream kept their seats forever, so the replicas
sat idle while every new request waited in the global queue.
"""

from __future__ import annotations

import pytest

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.drain_rate import DrainRate
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def req(rid: str, arrival_s: float = 0.0, ttft_s: float = 20.0) -> Request:
    return Request(rid, "m", 10, 20, arrival_s, SLO(ttft_s))


def qlm_core(max_queue_wait_s: float = 8.0) -> tuple[AdmissionCore, LiveReplica]:
    rep = LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1)
    core = AdmissionCore(
        [rep], create_global_policy("qlm"), "qlm", 64, max_queue_wait_s=max_queue_wait_s
    )
    return core, rep


def test_abandoned_admissions_are_released_so_the_queue_moves_again() -> None:
    core, rep = qlm_core()
    for k in range(10):
        core.admit(req(f"r{k}"), 0.0)
    placed = set(rep.in_flight)
    queued = core.queued
    assert placed and queued  # the engine window is full; the rest wait in the global queue
    core.take_dispatched()
    # every caller of a placed request went away before its stream started: nothing reports
    assert core.release_unheld("replica-0", set(), 1.0, lease_s=5.0) == []  # lease still runs
    assert core.queued == queued  # before the fix, this state never changed again
    released = core.release_unheld("replica-0", set(), 6.0, lease_s=5.0)
    assert set(released) == placed and core.released == len(placed)
    assert core.queued < queued  # the freed seats were pulled from the queue
    dispatched = {r.request_id for r, _ in core.take_dispatched()}
    assert dispatched and not dispatched & placed


def test_held_admissions_are_kept_whatever_their_age() -> None:
    core, rep = qlm_core()
    for k in range(3):
        core.admit(req(f"r{k}"), 0.0)
    held = set(rep.in_flight)
    assert core.release_unheld("replica-0", held, 100.0, lease_s=5.0) == []
    assert set(rep.in_flight) == held
    assert core.release_unheld("unknown-replica", set(), 100.0, lease_s=5.0) == []


@pytest.mark.parametrize(
    ("ttft_s", "max_wait_s", "now_s", "expired"),
    [
        (20.0, 8.0, 7.9, False),  # within both bounds
        (20.0, 8.0, 8.0, True),  # waited max_queue_wait_s
        (3.0, 8.0, 2.85, False),  # deadline 150 ms away, margin 100 ms
        (3.0, 8.0, 2.95, True),  # deadline closer than the margin: answer now
    ],
)
def test_queued_requests_are_answered_before_their_deadline(
    ttft_s: float, max_wait_s: float, now_s: float, expired: bool
) -> None:
    core, _ = qlm_core(max_queue_wait_s=max_wait_s)
    for k in range(8):
        core.admit(req(f"r{k}", ttft_s=ttft_s), 0.0)
    queued_before = core.queued
    assert queued_before
    out = core.expire_queued(now_s, margin_s=0.1)
    assert bool(out) == expired
    assert core.queued == (0 if expired else queued_before)
    assert not {r.request_id for r, _ in core.take_dispatched()} & set(out)


def test_admission_rejects_at_once_when_the_queue_cannot_drain_in_time() -> None:
    core, rep = qlm_core(max_queue_wait_s=8.0)
    t = 0.0
    for k in range(80):  # fill the queue
        core.admit(req(f"q{k}", arrival_s=t), t)
    queued = core.queued
    # measured drain: four dispatches a second (a report frees a seat, the queue head goes)
    for k in range(12):
        t = 0.25 * (k + 1)
        done = next(iter(rep.in_flight))
        core.report(done, 5, t)
    # the engine window's 5 pulls at t=0 plus the 12 after reports, over 3 s
    assert core.drain.rate_rps(t) == pytest.approx(17 / 3.0)
    assert core.queued > 8 / 0.25  # more than 8 s of work ahead of a new request
    decision = core.admit(req("late", arrival_s=t), t)
    assert not decision.admitted and decision.retry_after_s >= 1.0
    assert "drain" in decision.reason
    # a request due before everything queued has nobody ahead of it and is admitted
    urgent = core.admit(req("urgent", arrival_s=t, ttft_s=1.0), t)
    assert urgent.admitted
    assert core.queued <= queued + 1


@pytest.mark.parametrize(
    ("times", "now", "rate"),
    [
        ([], 1.0, None),  # nothing measured
        ([0.1 * k for k in range(7)], 1.0, None),  # below min_samples
        ([0.5 * k for k in range(10)], 4.5, 10 / 4.5),
        ([0.5 * k for k in range(10)], 100.0, None),  # all left the window
    ],
)
def test_drain_rate_over_its_window(times: list[float], now: float, rate: float | None) -> None:
    d = DrainRate(window_s=5.0, min_samples=8)
    for t in times:
        d.record(t)
    got = d.rate_rps(now)
    assert got == (None if rate is None else pytest.approx(rate))
    if rate is not None:
        assert d.expected_wait_s(10, now) == pytest.approx(10 / rate)


def test_drain_rate_rejects_a_bad_window() -> None:
    with pytest.raises(ValueError, match="window_s must be > 0"):
        DrainRate(window_s=0)


def test_health_says_why_the_scheduler_cannot_admit() -> None:
    rep = LiveReplica("replica-0", "cpu", "m", None)
    core = AdmissionCore([rep], create_global_policy("round-robin"), "round-robin", 2)
    assert core.health() == (True, "")
    core.admit(req("a"), 0.0)
    core.admit(req("b"), 0.0)
    ok, reason = core.health()
    assert not ok and "every replica has 2 requests in flight" in reason
    core.report("a", 3, 1.0)
    assert core.health() == (True, "")


def test_an_unhealthy_replica_gets_nothing_until_it_answers_again() -> None:
    reps = [
        LiveReplica("replica-0", "cpu", "m", None, max_num_seqs=1),
        LiveReplica("replica-1", "cpu", "m", None, max_num_seqs=1),
    ]
    core = AdmissionCore(reps, create_global_policy("qlm"), "qlm", 64)
    assert core.set_health("replica-1", False, 0.0)
    assert not core.set_health("replica-1", False, 0.0)  # no change
    for k in range(12):
        core.admit(req(f"r{k}"), 0.0)
    core.tick(0.5)
    assert not reps[1].in_flight and reps[0].in_flight  # nothing placed or pulled there
    assert core.set_health("replica-0", False, 1.0)
    decision = core.admit(req("late"), 1.0)
    assert not decision.admitted and decision.retry_after_s == 0.0  # 503 at once
    assert "no healthy replica" in decision.reason
    assert core.health() == (False, "no replica answers")
    assert core.set_health("replica-1", True, 2.0)
    core.admit(req("after"), 2.0)  # the policy meets the replica again with the next arrival
    core.tick(2.0)
    assert reps[1].in_flight  # it answers again: it takes work


@pytest.mark.parametrize(
    ("probes", "healthy_after"),
    [
        ([False], True),  # one slow answer does not flap the replica
        ([False, False], False),
        ([False, True, False], True),  # failures must be consecutive
        ([False, False, True], True),  # healthy again at its first answer
    ],
)
def test_probes_make_a_replica_unhealthy_only_after_failures_in_a_row(
    probes: list[bool], healthy_after: bool
) -> None:
    rep = LiveReplica("replica-0", "cpu", "m", None)
    core = AdmissionCore([rep], create_global_policy("round-robin"), "round-robin", 4)
    for k, answered in enumerate(probes):
        core.record_probe("replica-0", answered, float(k), failures_to_unhealthy=2)
    assert rep.healthy is healthy_after


def test_a_replica_back_from_a_lost_spell_releases_its_own_stale_admissions_only() -> None:
    """A replica that missed its probes is lost: QLM places what it held again on the other
    one. Once it answers again, what it no longer holds is released from its own books; the
    other replica keeps them. Before, the release went by the request's latest owner: the other
    replica's books lost them and the stale ones stayed for good (on a replica with several
    models, a stale request of another model counts as waiting and closes QLM's pull window)."""
    reps = [LiveReplica(f"replica-{k}", "cpu", "m", None, max_num_seqs=2) for k in range(2)]
    core = AdmissionCore(reps, create_global_policy("qlm"), "qlm", 64)
    for rep in reps:
        core.set_health(rep.application, True, 0.0)
    for k in range(4):
        core.admit(req(f"r{k}", ttft_s=60.0), 0.0)
    placed = set(reps[0].in_flight)
    assert placed and not reps[1].in_flight
    for t in (1.0, 2.0):
        core.record_probe("replica-0", False, t, failures_to_unhealthy=2)
    assert set(reps[1].in_flight) == placed  # placed again on the replica that answers
    core.record_probe("replica-0", True, 3.0)
    assert set(core.release_unheld("replica-0", set(), 10.0, lease_s=5.0)) == placed
    assert not reps[0].in_flight
    assert set(reps[1].in_flight) == placed
