"""The report delay bench-agree measures on a live trace and gives the simulated scheduler
(slomesh/bench/agree/report_delay.py), the scheduler's report log it reads
(services/scheduler/report_log.py), the median seed's run (slomesh/bench/agree/spread.py) and
a stored live run read back (slomesh/cli/bench_agree_reuse.py)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from services.scheduler.report_log import ReportLog
from shared.metrics.records import RequestRecord
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2
from slomesh.bench.agree.report_delay import describe, live_view, report_delays
from slomesh.bench.agree.sim import SimRun
from slomesh.bench.agree.spread import median_run
from slomesh.bench.agree.workload import AgreeWorkloadSpec, generate_agree_workload, parse_classes
from slomesh.cli.bench_agree_reuse import reuse_live


def _report(rid: str, finish_s: float, reason: str = "stop") -> scheduler_pb2.CompletionReport:
    return scheduler_pb2.CompletionReport(
        meta=common_pb2.RequestMeta(request_id=rid),
        replica=common_pb2.ReplicaRef(application="replica-1"),
        finish_unix_s=finish_s,
        output_tokens=4,
        finish_reason=reason,
    )


def test_the_scheduler_logs_each_report_it_took_and_the_delays_come_from_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reports.jsonl"
    log = ReportLog(str(path))
    log.add(_report("cal", 99.0), 99.5)  # a calibration trace's, before the trace
    log.add(_report("a", 100.0), 100.03)
    log.add(_report("b", 101.0, "length"), 101.25)
    log.add(_report("c", 102.0, "abort"), 102.5)  # not served
    log.add(_report("d", 103.0), 102.99)  # the clocks: counts as none
    assert not path.exists()  # buffered until flushed
    log.flush()
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert rows[1] == {
        "request_id": "a",
        "replica": "replica-1",
        "finish_s": 100.0,
        "reported_s": 100.03,
        "reason": "stop",
    }
    assert report_delays(path, since_unix_s=100.0) == pytest.approx([0.03, 0.25, 0.0])
    assert len(report_delays(path)) == 4
    assert report_delays(tmp_path / "none.jsonl") == []
    off = ReportLog(None)
    off.add(_report("a", 1.0), 2.0)
    off.flush()  # no log: nothing kept, nothing written


def test_the_live_view_takes_the_scheduler_status_interval_and_the_delays() -> None:
    config = {"applications": [{"name": "scheduler", "args": {"reconcile_interval_ms": 250}}]}
    view = live_view(config, [0.1, 0.2], seed=4)
    assert view.status_interval_s == 0.25 and view.report_delays_s == (0.1, 0.2)
    assert view.seed == 4
    assert live_view({"applications": []}, [], 0).status_interval_s == 1.0  # live default
    assert describe([]) == "no report delay measured (reported at once)"
    assert describe([0.01 * k for k in range(1, 101)]).startswith("report delay median 505 ms")
    text = describe([0.5] * 40, span_s=10.0, replicas=2)  # 20 s of delay over 10 s, 2 replicas
    assert text.endswith("; 1.00 finished requests per replica in flight")


def _rec(rid: str, met: bool) -> RequestRecord:
    return RequestRecord(
        rid, "m", "c", "t", "i", 0.0, 1, 1, 0.1, 0.2, 1.0 if met else 0.05, None, None
    )


@pytest.mark.parametrize(
    ("met", "chosen", "pcts"),
    [
        ([[1, 1], [1, 0], [0, 0]], 1, [100.0, 50.0, 0.0]),
        ([[1, 0], [1, 0], [1, 1]], 1, [50.0, 50.0, 100.0]),  # ties in seed order
        ([[1, 1], [0, 0]], 1, [100.0, 0.0]),  # even: the lower middle one
        ([[1, 0]], 0, [50.0]),
    ],
)
def test_the_median_seed_run_is_kept_with_every_seeds_attainment(
    met: list[list[int]], chosen: int, pcts: list[float]
) -> None:
    runs = [
        SimRun([_rec(f"r{k}", bool(m)) for k, m in enumerate(row)], [], None)  # type: ignore[arg-type]
        for row in met
    ]
    run, got = median_run(runs)
    assert run is runs[chosen] and got == pcts


def test_a_stored_live_run_is_read_back_only_for_its_own_trace(tmp_path: Path) -> None:
    classes = "short:0.4:2:16:32-128"
    spec = AgreeWorkloadSpec(classes=parse_classes(classes), requests=5, rate_rps=13.0)
    trace = generate_agree_workload(spec, 0)
    args = argparse.Namespace(
        requests=5,
        rate=13.0,
        seed=0,
        classes=classes,
        replicas=2,
        max_num_seqs=2,
        max_num_batched_tokens=2048,
        profile=Path("/x/cpu-tiny-llama.json"),
        stacks=["a", "b"],
        calibrate_rates=[8.0],
        host_speed_window_s=0.0,
        reuse_live=tmp_path,
    )
    stored = {k: str(v) for k, v in vars(args).items() if k in ("profile",)}
    env = {
        "a": {
            "loadavg_before": [1.0],
            "loadavg_after": [2.0],
            "trace_start_unix_s": 100.0,
            "trace_origin_unix_s": 101.0,
            "calibration_unix_s": {"8": [90.0, 99.0]},
        }
    }
    (tmp_path / "agree.json").write_text(
        json.dumps({"args": vars(args) | stored | {"reuse_live": None}, "environment": env})
    )
    records = [asdict(_rec(r.request_id, True)) for r in trace]
    (tmp_path / "live-a.json").write_text(json.dumps(records))
    log = ReportLog(str(tmp_path / "reports-a.jsonl"))
    log.add(_report("x", 100.5), 100.6)
    log.add(_report("y", 99.0), 99.9)  # before the trace started
    first = trace[0].to_request("m", arrival_s=101.0 + trace[0].arrival_s)
    log.admitted(first, first.arrival_s + 1.5)  # its check, 1.5 s after the ingress let it in
    log.admitted(replace(first, arrival_s=95.0), 95.1)  # the calibration's: the base hop
    log.flush()
    from shared.profiles.io import load_profiles

    profile = load_profiles(
        Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
    )[0]
    res = reuse_live(args, spec, trace, profile, 2)
    assert list(res.records) == ["a"]  # b has no stored records
    assert len(res.records["a"]) == 5 and res.env["a"]["loadavg_before"] == [1.0]
    assert res.report_delays["a"] == pytest.approx([0.1])
    near = [r.request_id for r in trace if r.arrival_s - trace[0].arrival_s <= 0.5]
    assert res.hops["a"].by_request == pytest.approx(dict.fromkeys(near, 1.5))
    assert res.hops["a"].base_s == pytest.approx(0.1)
    args.seed = 1
    with pytest.raises(ValueError, match="another trace"):
        reuse_live(args, spec, trace, profile, 2)
