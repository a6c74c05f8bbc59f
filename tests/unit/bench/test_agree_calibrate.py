"""bench-agree's calibration and live config: the simulator dates records from when a request
was sent (the calibrated submit overhead counts in its TTFT), live records calibrate the profile
as bench-goodput does (its decode step grows with the rate offered), and the simulator runs the
live mesh's scheduler and ingress admission as the live config sets them."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest

from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.domain.profile import DecodeCoeffs
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.calibrate import calibrated, offered, shift_in, shift_out
from slomesh.bench.agree.compare import attainment
from slomesh.bench.agree.sim import ProfiledSimulator, simulate
from slomesh.bench.agree.workload import AgreeWorkloadSpec, generate_agree_workload, parse_classes
from slomesh.cli.bench_agree_live import live_config, sim_admission
from slomesh.sim.ingress import SimIngressConfig
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


def _served(records: list[RequestRecord], tpot_x: float, late_s: float) -> list[RequestRecord]:
    """`records` with first tokens `late_s` later and `tpot_x` times their time per token."""
    out = []
    for r in records:
        assert r.first_token_s is not None and r.finish_s is not None
        first = r.first_token_s + late_s
        out.append(
            replace(
                r, first_token_s=first, finish_s=first + tpot_x * (r.finish_s - r.first_token_s)
            )
        )
    return out


def _step_ratio(cal: HardwareProfile, profile: HardwareProfile) -> list[float]:
    return [cal.decode_time_s(200, n) / profile.decode_time_s(200, n) for n in (1, 2)]


def test_live_records_calibrate_step_times_and_submit_overhead() -> None:
    """Records three times slower per token than the profile, first tokens 0.3 s late: the
    calibrated profile's decode steps are about 3 times the profile's and the rest of the TTFT
    is overhead; records twice as fast per token give steps of about a half (both ways)."""
    profile = load_profiles(PROFILE)[0]
    trace = generate_agree_workload(_trace(30, 0.5), 0)
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=8192)
    sim = simulate(
        profile, 2, engine, STACKS.create("vllm-fcfs"), [r.to_request(profile.model) for r in trace]
    )
    slow = _served(sim.records, 3.0, 0.3)
    assert {o.outcome for o in offered(slow)} == {"served"}
    cal = calibrated(profile, {0.5: slow}, replicas=2, max_num_seqs=2, rate_rps=0.5)
    assert _step_ratio(cal, profile) == pytest.approx([3.0, 3.0], rel=0.2)
    assert 0.2 < cal.submit_overhead_s < 0.35
    quicker = calibrated(
        profile, {0.5: _served(sim.records, 0.5, 0.0)}, replicas=2, max_num_seqs=2, rate_rps=0.5
    )
    assert _step_ratio(quicker, profile) == pytest.approx([0.5, 0.5], rel=0.2)
    rejected = RequestRecord.from_request(
        trace[0].to_request("x"), None, None, None, 0, reject_reason="HTTP 429"
    )
    assert offered([rejected])[0].outcome == "rejected"


def _slower(profile: HardwareProfile, x: float) -> HardwareProfile:
    d = profile.decode
    return replace(profile, decode=DecodeCoeffs(d.d1 * x, d.d2 * x, d.d3 * x, d.d4 * x))


def test_two_calibration_rates_give_a_decode_step_that_grows_with_the_rate() -> None:
    """Decode steps 1.5 times as slow at 8/s as at 4/s (the control plane takes the engines'
    cores as more requests arrive): the profile read at each rate decodes as that rate's
    records did, and read at 12/s slower still."""
    profile = load_profiles(PROFILE)[0]
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=8192)
    by_rate = {}
    for k, (rate, x) in enumerate(((4.0, 1.0), (8.0, 1.5))):
        spec = AgreeWorkloadSpec(
            classes=parse_classes("long:1:3600:256:64-256"), requests=80, rate_rps=rate
        )
        trace = generate_agree_workload(spec, k)
        stack = STACKS.create("vllm-fcfs")
        live = _slower(profile, x)
        by_rate[rate] = simulate(live, 2, engine, stack, [r.to_request(live.model) for r in trace])
    records = {rate: run.records for rate, run in by_rate.items()}
    at = {r: calibrated(profile, records, 2, 2, rate_rps=r) for r in (4.0, 8.0, 12.0)}
    assert _step_ratio(at[4.0], profile) == pytest.approx([1.0, 1.0], rel=0.1)
    assert _step_ratio(at[8.0], profile) == pytest.approx([1.5, 1.5], rel=0.1)
    assert min(_step_ratio(at[12.0], profile)) > 1.2 * max(_step_ratio(at[8.0], profile))
    assert "read at 12 requests/s" in at[12.0].source


def test_a_calibration_trace_at_the_measured_rate_alone_sets_the_step() -> None:
    """The lower rate's trace ran 1.4 times as slow (the mesh still warming up): read at the
    rate of the other trace, the profile decodes as that trace did, not as a plane through both;
    read at the lower rate, as the lower rate's trace did."""
    profile = load_profiles(PROFILE)[0]
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=8192)
    records = {}
    for k, (rate, x) in enumerate(((4.0, 1.4), (8.0, 1.0))):
        spec = AgreeWorkloadSpec(
            classes=parse_classes("long:1:3600:256:64-256"), requests=80, rate_rps=rate
        )
        trace = generate_agree_workload(spec, k)
        live = _slower(profile, x)
        run = simulate(
            live, 2, engine, STACKS.create("vllm-fcfs"), [r.to_request(live.model) for r in trace]
        )
        records[rate] = run.records
    at_8 = calibrated(profile, records, 2, 2, rate_rps=8.0)
    assert _step_ratio(at_8, profile) == pytest.approx([1.0, 1.0], rel=0.1)
    at_4 = calibrated(profile, records, 2, 2, rate_rps=4.0)
    assert _step_ratio(at_4, profile) == pytest.approx([1.4, 1.4], rel=0.1)


def test_live_config_keeps_the_ingress_admission_and_the_simulator_runs_it() -> None:
    """The ingress's delivered-latency guard and reject hold-off run live as `slomesh up` runs
    them, and the simulator gets the same settings (and the scheduler's lifted limits)."""
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
    assert ingress.get("delivered_guard", {}).get("enabled", True) is True
    assert "reject_hold_off_s" not in ingress
    admission, sim_ingress = sim_admission(config)
    # the live ingress's defaults, reached as Serve's proxy routes (power of two choices)
    assert sim_ingress == SimIngressConfig(routing="fewest-ongoing")
    assert sim_ingress.delivered_guard.enabled and sim_ingress.reject_hold_off_s > 0
    assert admission.max_in_flight_per_replica == scheduler["max_in_flight_per_replica"] == 100
    assert admission.max_queue_wait_ms == scheduler["max_queue_wait_ms"] == 3600e3
    assert ingress["slo"]["classes"]["short"] == {"ttft_ms": 500.0}
    assert scheduler["stack"] == "vllm-fcfs"
    assert apps["replica-0"]["vllm"]["queue_policy"] == "fcfs"
    assert apps["replica-1"]["vllm"]["max_num_seqs"] == 2  # --replicas copies of replica-0
    assert [r["application"] for r in scheduler["replicas"]] == ["replica-0", "replica-1"]
    assert (
        live_config(args, _trace(100, 2.0), "edf")["applications"][0]["args"]["vllm"][
            "queue_policy"
        ]
        == "edf"
    )


def test_the_profiled_simulator_runs_the_engine_config_the_stack_asks_for() -> None:
    """The instances bench-agree puts in place of the stand-in run the stack's engine config:
    EDF engines that list their waiting requests for the flagship's deadline-aware guard."""
    profile = load_profiles(PROFILE)[0]
    engine = EngineConfig(max_num_seqs=2, max_num_batched_tokens=2048)
    sim = ProfiledSimulator(profile, 2, engine, STACKS.create("slomesh"), [])
    configs = [i.core.config for i in sim.instances]
    assert [(c.queue_policy, c.report_waiting_prefill, c.max_num_seqs) for c in configs] == [
        ("edf", True, 2)
    ] * 2
