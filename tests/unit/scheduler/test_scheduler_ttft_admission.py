"""The scheduler-side TTFT guard (core/ttft_admission.py): predictions from replica reports and
the measured profile, rejections with the prediction and the SLO, and its place in admission."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.ttft_admission import (
    QueueReport,
    TTFTAdmission,
    TTFTAdmissionConfig,
)
from shared.domain import SLO, Request

TIGHT = SLO(0.5, class_name="tight")
CHAT = SLO(3.0, class_name="chat")


def req(rid: str, slo: SLO = TIGHT, n_in: int = 1000, at: float = 10.0) -> Request:
    return Request(rid, "m", n_in, 64, at, slo, true_output_tokens=32)


def replica(fakes, name: str = "r0", max_num_seqs: int = 8) -> LiveReplica:
    # prefill on this profile: T(1, L) = 1e-4 * L + 0.01 s
    return LiveReplica(name, "gpu", "m", fakes.profile(), max_num_seqs=max_num_seqs)


def guard(**cfg: object) -> TTFTAdmission:
    return TTFTAdmission(TTFTAdmissionConfig.model_validate({"enabled": True} | cfg))


@pytest.mark.parametrize(
    ("report", "placed_after", "running_full", "expected_s"),
    [
        # (waiting, running, backlog tokens) reported at t=9.5; prompt 1000 tokens
        ((0, 1, 0), 0, False, 1e-4 * 1000 + 0.01),
        ((2, 3, 4000), 0, False, 1e-4 * 5000 + 0.01),
        # a request of 500 prompt tokens placed after the report counts as backlog too
        ((2, 3, 4000), 500, False, 1e-4 * 5500 + 0.01),
    ],
)
def test_predicted_ttft_is_prefill_of_reported_backlog_and_own_prompt(
    fakes, report, placed_after, running_full, expected_s
):
    rep = replica(fakes)
    g = guard()
    waiting, running, backlog = report
    g.update("r0", QueueReport(waiting, running, backlog, reported_s=9.5))
    if placed_after:
        rep.book(req("later", n_in=placed_after, at=9.8), 9.8)
    rep.book(req("before", n_in=7777, at=9.0), 9.0)  # before the report: already counted
    pred = g.predict(rep, req("r"), 10.0)
    assert pred is not None
    assert pred.ttft_s == pytest.approx(expected_s)


def test_a_full_running_batch_adds_a_seat_wait_per_waiting_request(fakes):
    rep = replica(fakes, max_num_seqs=4)
    g = guard()
    g.update("r0", QueueReport(0, 3, 0, 9.5))
    free = g.predict(rep, req("r"), 10.0)
    g.update("r0", QueueReport(0, 4, 0, 9.6))
    full0 = g.predict(rep, req("r"), 10.0)
    g.update("r0", QueueReport(3, 4, 0, 9.7))
    full3 = g.predict(rep, req("r"), 10.0)
    assert free and full0 and full3
    seat = full0.ttft_s - free.ttft_s
    assert seat > 0
    assert full3.ttft_s - free.ttft_s == pytest.approx(4 * seat)


@pytest.mark.parametrize(
    ("reports", "slo", "kept", "rejected"),
    [
        ({"r0": 4000, "r1": 9000}, TIGHT, [], True),  # 0.51 s and 1.01 s > 0.5 s
        ({"r0": 3000, "r1": 9000}, TIGHT, ["r0"], False),  # 0.41 s on r0
        ({"r0": 4000, "r1": 9000}, CHAT, ["r0", "r1"], False),
        ({"r0": 4000}, TIGHT, ["r1"], False),  # r1 has not reported: not judged, kept
    ],
)
def test_check_keeps_replicas_that_make_the_slo_and_rejects_when_none_do(
    fakes, reports, slo, kept, rejected
):
    reps = [replica(fakes, "r0"), replica(fakes, "r1")]
    g = guard()
    for name, backlog in reports.items():
        g.update(name, QueueReport(1, 2, backlog, 10.0))
    v = g.check(req("r", slo), reps, 10.0)
    assert [r.application for r in v.candidates] == kept
    assert v.rejected is rejected
    if rejected:
        assert "predicted TTFT 0.510 s on replica r0" in v.reason
        assert "'tight' TTFT SLO of 0.5 s" in v.reason
        assert v.retry_after_s == pytest.approx(1.0)  # excess 0.01 s, clamped up to 1 s


@pytest.mark.parametrize(
    ("cfg", "report_s", "arrival_s", "rejected"),
    [
        ({"enabled": False}, 10.0, 10.0, False),  # off: never judges
        ({}, 10.0, 10.0, True),  # 0.51 s > 0.5 s
        ({}, 4.0, 10.0, False),  # report 6 s old > max_report_age_s 5: stale, not judged
        ({"margin_s": 0.2}, 10.0, 10.0, True),
        # 0.31 s predicted, but the request already spent 0.3 s before admission
        ({}, 10.0, 9.7, True),
    ],
)
def test_check_honours_switch_staleness_margin_and_time_already_spent(
    fakes, cfg, report_s, arrival_s, rejected
):
    g = TTFTAdmission(TTFTAdmissionConfig.model_validate({"enabled": True} | cfg))
    backlog = 4000 if arrival_s == 10.0 else 2000
    g.update("r0", QueueReport(0, 1, backlog, report_s))
    v = g.check(req("r", at=arrival_s), [replica(fakes)], 10.0)
    assert v.rejected is rejected


def test_an_older_report_does_not_replace_a_newer_one():
    g = guard()
    g.update("r0", QueueReport(0, 1, 100, 10.0))
    g.update("r0", QueueReport(5, 5, 9999, 9.0))
    assert g.reports["r0"].pending_prefill_tokens == 100


def test_admission_answers_an_unattainable_request_with_the_guard_reason(fakes):
    rep = replica(fakes)
    core = AdmissionCore([rep], create_global_policy("least-loaded"), "least-loaded", 64)
    core.ttft = guard()
    core.ttft.update("r0", QueueReport(2, 3, 20_000, 10.0))  # 2.1 s of prefill queued
    d = core.admit(req("tight"), 10.0)
    assert not d.admitted
    assert "predicted TTFT 2.110 s" in d.reason and "SLO of 0.5 s" in d.reason
    assert d.retry_after_s == pytest.approx(1.61)
    assert d.drop_reason == "deadline-infeasible"
    assert core.admit(req("chat", CHAT), 10.0).admitted  # 2.11 s fits a 3 s SLO
    assert list(rep.in_flight) == ["chat"]


# an EDF engine's report at t=9.5: 300 tokens running now (prefill chunks, decodes) and three
# waiting requests due at 10.2, 10.4 and 40.0 s of 1000, 2000 and 5000 tokens
EDF_WAITING = ((10.2, 1000), (10.4, 2000), (40.0, 5000))
EDF_REPORT = QueueReport(3, 2, 8300, 9.5, EDF_WAITING, deadline_ordered=True)


@pytest.mark.parametrize(
    ("report", "due_at", "later", "expected_backlog"),
    [
        # FCFS: the whole backlog is ahead, whatever r's deadline
        (QueueReport(3, 2, 8300, 9.5, EDF_WAITING), 10.5, None, 8300),
        # EDF without a breakdown: the whole backlog (nothing is known to run after r)
        (QueueReport(3, 2, 8300, 9.5, (), deadline_ordered=True), 10.5, None, 8300),
        # EDF: what runs now and the waiting requests due before r
        (EDF_REPORT, 10.5, None, 300 + 1000 + 2000),
        (EDF_REPORT, 10.3, None, 300 + 1000),
        (EDF_REPORT, 10.1, None, 300),
        (EDF_REPORT, 50.0, None, 8300),
        # placed after the report: counted when due first (9.8 + 0.5 = 10.3 <= 10.5) ...
        (EDF_REPORT, 10.5, 9.8, 300 + 1000 + 2000 + 500),
        # ... and not when due after r (9.8 + 3 s, the CHAT deadline)
        (EDF_REPORT, 10.5, "chat", 300 + 1000 + 2000),
    ],
)
def test_an_edf_engine_counts_only_the_backlog_due_before_the_request(
    fakes, report, due_at, later, expected_backlog
):
    rep = replica(fakes)
    g = guard(deadline_aware=True)
    g.update("r0", report)
    if later == "chat":
        rep.book(req("later", slo=CHAT, n_in=500, at=9.8), 9.8)
    elif later is not None:
        rep.book(req("later", n_in=500, at=later), later)
    r = req("r", slo=SLO(ttft_deadline_s=due_at - 10.0))
    pred = g.predict(rep, r, 10.0)
    assert pred is not None
    assert pred.backlog_tokens == expected_backlog
    assert pred.ttft_s == pytest.approx(1e-4 * (expected_backlog + 1000) + 0.01)


def test_an_edf_engine_with_a_full_batch_waits_a_seat_only_per_request_due_first(fakes):
    rep = replica(fakes, max_num_seqs=2)
    g = guard(deadline_aware=True)
    g.update("r0", QueueReport(3, 2, 300, 9.5, (), deadline_ordered=True))
    all_three = g.predict(rep, req("r", slo=SLO(ttft_deadline_s=0.5)), 10.0)
    g.update("r0", EDF_REPORT)
    one_first = g.predict(rep, req("r", slo=SLO(ttft_deadline_s=0.25)), 10.0)
    assert all_three and one_first
    seat = (all_three.ttft_s - 1e-4 * 1300 - 0.01) / 4
    assert one_first.ttft_s == pytest.approx(1e-4 * 2300 + 0.01 + 2 * seat)


def test_without_deadline_awareness_an_edf_engine_counts_its_whole_backlog(fakes):
    g = guard()
    g.update("r0", EDF_REPORT)
    pred = g.predict(replica(fakes), req("r", slo=SLO(ttft_deadline_s=0.3)), 10.0)
    assert pred is not None and pred.backlog_tokens == 8300


@pytest.mark.parametrize("bounds", [False, True])
def test_a_replica_the_guard_judges_may_take_requests_past_the_in_flight_limit(
    fakes: Any, bounds: bool
) -> None:
    rep = replica(fakes)
    core = AdmissionCore([rep], create_global_policy("least-loaded"), "least-loaded", 1)
    core.ttft = guard(bounds_in_flight=bounds)
    core.ttft.update("r0", QueueReport(0, 1, 0, 10.0))
    assert core.admit(req("a", CHAT), 10.0).admitted
    second = core.admit(req("b", CHAT), 10.0)  # 1 in flight: at the limit of 1
    assert second.admitted == bounds
    if not bounds:
        assert second.drop_reason == "replicas-full"
    # with bounds_in_flight, the guard's prediction still bounds it: 30,000 tokens queued
    core.ttft.update("r0", QueueReport(5, 1, 30_000, 10.0))
    third = core.admit(req("c", CHAT), 10.0)
    assert not third.admitted
    assert third.drop_reason == ("deadline-infeasible" if bounds else "replicas-full")
    # a stale report: the replica is not judged, so the count limit applies again
    assert core.admit(req("d", CHAT), 16.0).drop_reason == "replicas-full"
