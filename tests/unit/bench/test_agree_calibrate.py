"""bench-agree's calibration and live config: the simulator dates records from when a request
was sent (the calibrated submit overhead counts in its TTFT), live records calibrate the profile
as bench-goodput does, and the live mesh runs with its overload protections lifted."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.calibrate import calibrated, offered, shift_in, shift_out
from slomesh.bench.agree.compare import attainment
from slomesh.bench.agree.sim import simulate
from slomesh.bench.agree.workload import AgreeWorkloadSpec, generate_agree_workload, parse_classes
from slomesh.cli.bench_agree_live import live_config
from slomesh.stacks import STACKS

PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
CLASSES = "short:0.4:0.5:16:32-128,long:0.6:3600:64:64-256"


def _trace(requests: int, rate: float) -> AgreeWorkloadSpec:
    return AgreeWorkloadSpec(classes=parse_classes(CLASSES), requests=requests, rate_rps=rate)


def test_shift_in_and_out_date_records_from_the_send() -> None:
    profile = load_profiles(PROFILE)[0]
    reqs = [r.to_request("tiny-llama") for r in generate_agree_workload(_trace(5, 1.0), 0)]
    moved = shift_in(reqs, 0.25)
    assert [m.arrival_s - r.arrival_s for m, r in zip(moved, reqs, strict=True)] == pytest.approx(
        [0.25] * 5
    )
    rec = RequestRecord.from_request(reqs[0], "i0", 1.0, 2.0, reqs[0].max_tokens)
    back = shift_out([replace(rec, arrival_s=rec.arrival_s + 0.25)], 0.25)[0]
    assert back.arrival_s == pytest.approx(rec.arrival_s)
    assert shift_in(reqs, 0.0) == reqs and profile.submit_overhead_s == 0.0


def test_a_submit_overhead_delays_every_first_token_in_the_simulator() -> None:
    """Same trace, same stack: a profile with 0.6 s of hops before the engine misses the 0.5 s
    class that the bare profile meets at this light load."""
    profile = load_profiles(PROFILE)[0]
    trace = generate_agree_workload(_trace(20, 1.0), 0)
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    stack = STACKS.create("edf")

    def run(overhead_s: float) -> list[RequestRecord]:
        p = replace(profile, submit_overhead_s=overhead_s)
        return simulate(p, 2, engine, stack, [r.to_request(p.model) for r in trace]).records

    bare, slow = run(0.0), run(0.6)
    assert [r.arrival_s for r in slow] == pytest.approx([r.arrival_s for r in bare])
    assert all(
        s.ttft_s is not None and b.ttft_s is not None and s.ttft_s >= b.ttft_s + 0.6 - 1e-9
        for s, b in zip(slow, bare, strict=True)
        if not (s.rejected or b.rejected)
    )
    assert attainment(bare)["short"][1] == 100.0
    assert attainment(slow)["short"][1] == 0.0


def test_live_records_calibrate_step_times_and_submit_overhead() -> None:
    """Records three times slower per token than the profile, first tokens 0.3 s late: the
    calibrated profile scales its steps by about 3 and adds the rest of the TTFT as overhead;
    records twice as fast per token scale them by about a half (calibration runs both ways)."""
    profile = load_profiles(PROFILE)[0]
    trace = generate_agree_workload(_trace(30, 0.5), 0)
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=8192)
    sim = simulate(
        profile, 2, engine, STACKS.create("vllm-fcfs"), [r.to_request(profile.model) for r in trace]
    )
    slow = []
    for r in sim.records:
        assert r.first_token_s is not None and r.finish_s is not None
        first = r.first_token_s + 0.3
        slow.append(
            replace(r, first_token_s=first, finish_s=first + 3 * (r.finish_s - r.first_token_s))
        )
    assert {o.outcome for o in offered(slow)} == {"served"}
    cal = calibrated(profile, slow, replicas=2, max_num_seqs=2)
    assert cal.decode.d4 / profile.decode.d4 == pytest.approx(3.0, rel=0.15)
    assert 0.2 < cal.submit_overhead_s < 0.35
    fast = [
        replace(r, finish_s=r.first_token_s + 0.5 * (r.finish_s - r.first_token_s))
        for r in sim.records
        if r.first_token_s is not None and r.finish_s is not None
    ]
    quicker = calibrated(profile, fast, replicas=2, max_num_seqs=2)
    assert quicker.decode.d4 / profile.decode.d4 == pytest.approx(0.5, rel=0.15)
    rejected = RequestRecord.from_request(
        trace[0].to_request("x"), None, None, None, 0, reject_reason="HTTP 429"
    )
    assert offered([rejected])[0].outcome == "rejected"


def test_live_config_lifts_the_mesh_overload_protections_and_applies_the_stack() -> None:
    args = argparse.Namespace(
        max_num_seqs=2,
        max_num_batched_tokens=2048,
        profile=PROFILE,
        qlm_widen=False,
        replicas=2,
    )
    config = live_config(args, _trace(100, 2.0), "vllm-fcfs")
    apps = {a["name"]: a["args"] for a in config["applications"]}
    ingress, scheduler = apps["ingress"], apps["scheduler"]
    assert ingress["delivered_guard"]["enabled"] is False
    assert ingress["reject_hold_off_s"] == 0.0
    assert ingress["slo"]["classes"]["short"] == {"ttft_ms": 500.0}
    assert scheduler["policy_label"] == "vllm-fcfs"
    assert apps["replica-0"]["vllm"]["queue_policy"] == "fcfs"
    assert apps["replica-1"]["vllm"]["max_num_seqs"] == 2  # --replicas copies of replica-0
    assert [r["application"] for r in scheduler["replicas"]] == ["replica-0", "replica-1"]
    assert (
        live_config(args, _trace(100, 2.0), "edf")["applications"][0]["args"]["vllm"][
            "queue_policy"
        ]
        == "edf"
    )
