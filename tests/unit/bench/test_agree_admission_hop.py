"""The admission hops bench-agree measures on a live trace (slomesh/bench/agree/admission_hop.py)
from the scheduler's log (services/scheduler/report_log.py) and hands the simulated scheduler
(slomesh/bench/agree/report_delay.py `live_view`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.scheduler.report_log import ReportLog
from shared.domain import SLO, Request
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2
from slomesh.bench.agree.admission_hop import (
    AdmissionHops,
    admission_hops,
    describe,
    logged_hops,
    nearest,
)
from slomesh.bench.agree.report_delay import live_view, report_delays
from slomesh.bench.agree.workload import AgreeRequest

ORIGIN = 1000.0
"""Wall time of the trace's offset 0 in these tests."""


def _admitted(log: ReportLog, arrival_s: float, hop_s: float) -> None:
    req = Request(f"x{arrival_s}", "m", 8, 8, arrival_s, SLO(2.0, None, class_name="c"))
    log.admitted(req, arrival_s + hop_s)


def _trace(*offsets: float) -> list[AgreeRequest]:
    return [AgreeRequest(f"t{k}", t, "c", 8, 8, 2.0, k) for k, t in enumerate(offsets)]


def _log(path: Path) -> None:
    """Calibration at 8/s (hops 0.05, 0.07, 0.09) and 13/s (0.5), then the trace."""
    log = ReportLog(str(path))
    for t, hop in [(900.0, 0.05), (901.0, 0.09), (902.0, 0.07), (950.0, 0.5)]:
        _admitted(log, t, hop)
    report = scheduler_pb2.CompletionReport(
        meta=common_pb2.RequestMeta(request_id="cal"),
        replica=common_pb2.ReplicaRef(application="replica-0"),
        finish_unix_s=1000.5,
        finish_reason="stop",
    )
    log.add(report, 1000.6)  # a report among the admissions
    _admitted(log, ORIGIN + 0.01, 0.2)  # t0, sent at 0.0
    _admitted(log, ORIGIN + 5.02, 2.5)  # t1, sent at 5.0: the control plane starved
    log.flush()


ENV = {"trace_origin_unix_s": ORIGIN, "calibration_unix_s": {"8": [899.0, 910.0], "13": [940, 960]}}


def test_the_scheduler_logs_each_admission_checked_beside_its_reports(tmp_path: Path) -> None:
    path = tmp_path / "reports.jsonl"
    _log(path)
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows[0] == {"request_id": "x900.0", "arrival_s": 900.0, "admitted_s": 900.05}
    assert report_delays(path) == pytest.approx([0.1])  # the admissions are no reports
    low = logged_hops(path, 899.0, 910.0)  # the 8/s calibration's window, by arrival
    assert [t for t, _ in low] == [900.0, 901.0, 902.0]
    assert [hop for _, hop in low] == pytest.approx([0.05, 0.09, 0.07])
    off = ReportLog(None)
    _admitted(off, 1.0, 1.0)
    off.flush()  # no log: nothing kept, nothing written


def test_each_trace_request_takes_the_hop_nearest_its_send_and_the_base_is_the_low_rates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reports.jsonl"
    _log(path)
    hops = admission_hops(path, _trace(0.0, 5.0, 5.3, 9.0), ENV)
    assert hops.base_s == pytest.approx(0.07)  # median of the 8/s calibration's, not 13/s's
    assert hops.measured == 2
    # t2 went no further than the ingress (or took a lease credit): its neighbour's moment;
    # t3 has no check within MAX_GAP_S: the base hop (left out)
    assert hops.by_request == pytest.approx({"t0": 0.2, "t1": 2.5, "t2": 2.5})
    view = live_view({"applications": []}, [], 0, hops)
    assert view.admission_hops_s == hops.by_request and view.admission_hop_s == hops.base_s
    assert admission_hops(path, _trace(0.0), {}) == AdmissionHops()  # a run without the log
    assert live_view({"applications": []}, [], 0).admission_hop_s == 0.0
    assert describe(AdmissionHops()).startswith("no admission hop measured")
    assert describe(hops).startswith("admission hop base 70 ms, over the trace median 2500 ms")


def test_nearest_keeps_only_a_check_within_the_gap() -> None:
    hops = [(1.0, 0.1), (2.0, 0.2), (4.0, 0.4)]
    got = nearest({"a": 1.4, "b": 1.6, "c": 3.0, "d": 4.4, "e": 0.0}, hops, max_gap_s=0.5)
    assert got == {"a": 0.1, "b": 0.2, "d": 0.4}
    assert nearest({"a": 1.0}, []) == {}
