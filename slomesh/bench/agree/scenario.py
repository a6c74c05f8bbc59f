"""`bench-agree --scenario NAME`: a named scenario's workload on its shipped live mesh and on
its simulated cluster, instead of the single-model workload on deploy/ray/local.yaml.

A scenario here names three things: the scenario (slomesh/bench/scenarios: its streams give the
trace, its cluster the simulated side), the shipped config its live mesh runs, and the profile
file of measured step and swap times that config publishes to the planner (the same file the
scenario's cluster simulates). The trace is the scenario's workload at the rate asked for, each
request with its own model, class, deadline, prompt and output length; live, every request
names its model (the client sends it as `model`). The measured profiles are used as they are
(no calibration trace: calibrate.py fits one model's profile).

The run's report adds what only the live side can count: each replica's measured swaps
(ReplicaDeployment.SwapLog), the requests a failed swap answered with an error, and the
requests lost after they were accepted (a 200 answer whose stream ended short of its forced
output length), beside the simulator's swap count and the profile's swap time, and how many
swaps ran while another replica swapped too (`overlapping_swaps`: two engine restarts at once
share the host's CPUs, where the profile measured one at a time).
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.domain import HardwareProfile
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from shared.workloads import generate, get_slo_class
from slomesh.bench.agree.calibrate import shift_in, shift_out
from slomesh.bench.agree.sim import SimRun
from slomesh.bench.agree.workload import AgreeClass, AgreeRequest, AgreeWorkloadSpec
from slomesh.bench.scenarios import SCENARIOS, ScenarioSpec
from slomesh.launch.mesh import DEPLOY_DIR
from slomesh.sim.ingress import SimIngressConfig
from slomesh.sim.live_view import LiveViewConfig
from slomesh.sim.scheduler import SimAdmissionConfig
from slomesh.sim.simulator import Simulator
from slomesh.stacks import StackConfig


@dataclass(frozen=True)
class LiveScenario:
    """A scenario with its shipped live mesh."""

    spec: ScenarioSpec
    config: Path
    """The shipped config its live mesh runs."""
    profile: Path
    """The measured profiles that config publishes and the scenario's cluster simulates."""


MESHES: dict[str, tuple[str, str]] = {
    "many-models": ("local-many-models.yaml", "profiles/cpu-tiny-many.json"),
}
"""Scenario -> (config, profile file) under deploy/ray."""


def live_scenario(name: str) -> LiveScenario:
    """The scenario `name` with its mesh; ValueError naming the ones that have one."""
    if name not in MESHES:
        raise ValueError(f"--scenario: '{name}' has no live mesh; one of: {', '.join(MESHES)}")
    config, profile = MESHES[name]
    return LiveScenario(SCENARIOS.create(name), DEPLOY_DIR / config, DEPLOY_DIR / profile)


def apply_scenario(args: argparse.Namespace) -> LiveScenario | None:
    """--scenario's mesh, with the bench-agree arguments it fixes set from it (None: no
    --scenario; ValueError for a scenario without a mesh)."""
    args.scenario_config = None
    if args.scenario is None:
        return None
    scen = live_scenario(args.scenario)
    args.scenario_config = scen.config
    args.profile = scen.profile
    args.classes = f"scenario {scen.spec.name}"
    args.calibrate_requests = 0
    args.max_num_seqs = scen.spec.cluster.engine.max_num_seqs
    args.max_num_batched_tokens = scen.spec.cluster.engine.max_num_batched_tokens
    return scen


def scenario_workload(sc: ScenarioSpec, requests: int, rate_rps: float) -> AgreeWorkloadSpec:
    """The trace's classes as bench-agree's live config sets them at the ingress (name and
    TTFT deadline, the first stream's of each class; the lengths are the scenario's, per
    request), its size and rate."""
    classes: dict[str, AgreeClass] = {}
    for s in sc.workload.streams:
        ttft_s = s.ttft_deadline_s or get_slo_class(s.slo_class).ttft_deadline_s
        classes.setdefault(
            s.slo_class,
            AgreeClass(
                name=s.slo_class,
                weight=s.rate_rps,
                ttft_s=ttft_s,
                output_tokens=1,
                prompt_tokens_min=2,
                prompt_tokens_max=2,
            ),
        )
    return AgreeWorkloadSpec(classes=list(classes.values()), requests=requests, rate_rps=rate_rps)


def scenario_trace(
    sc: ScenarioSpec, requests: int, rate_rps: float, seed: int
) -> list[AgreeRequest]:
    """The scenario's workload at `rate_rps`, `requests` requests, as bench-agree's trace."""
    workload = sc.workload.model_copy(update={"requests": requests}).with_total_rate(rate_rps)
    rng = random.Random(seed)
    return [
        AgreeRequest(
            request_id=r.request_id,
            arrival_s=r.arrival_s,
            class_name=r.slo.class_name,
            prompt_tokens=max(2, r.input_tokens),
            output_tokens=max(1, r.true_output_tokens or r.max_tokens),
            ttft_s=r.slo.ttft_deadline_s,
            prompt_seed=rng.getrandbits(32),
            model=r.model,
        )
        for r in generate(workload, seed)
    ]


def simulate_scenario(
    sc: ScenarioSpec,
    stack: StackConfig,
    trace: Sequence[AgreeRequest],
    admission: SimAdmissionConfig,
    ingress: SimIngressConfig,
    overhead_s: float = 0.0,
    load_slowdown: float = 0.0,
    view: LiveViewConfig | None = None,
) -> tuple[SimRun, dict[str, int]]:
    """The trace on the scenario's cluster behind the live config's admission; the run and
    the swaps each of its instances made. `load_slowdown`: the cluster's
    concurrent_load_slowdown (loads at once on its host; load_overlap.py fits it live);
    `view`: the policy reads the scheduler's books (slomesh/sim/live_view.py; None: the
    engines)."""
    requests = shift_in([r.to_request(r.model or "") for r in trace], overhead_s)
    cluster = sc.cluster.model_copy(update={"concurrent_load_slowdown": load_slowdown})
    sim = Simulator(cluster, stack, requests, admission=admission, ingress=ingress, live_view=view)
    result = sim.run()
    tracker = getattr(sim.global_policy, "rwt_error", None)
    scored = list(tracker.scored()) if tracker is not None else []
    swaps = {i.instance: i.swaps for i in result.instances}
    return SimRun(shift_out(result.records, overhead_s), scored, sim.global_policy), swaps


def lost_requests(records: Sequence[RequestRecord], trace: Sequence[AgreeRequest]) -> list[str]:
    """Requests answered 200 whose stream ended short of their forced output length."""
    forced = {r.request_id: r.output_tokens for r in trace}
    return [
        r.request_id
        for r in records
        if not r.rejected and r.output_tokens < forced.get(r.request_id, 0)
    ]


def error_requests(records: Sequence[RequestRecord]) -> list[str]:
    """Requests answered with a server error (HTTP 500: failed after a replica took them, such
    as a stream the ingress gave up on), not refused (429, or 503 when no replica took it)."""
    return [r.request_id for r in records if r.rejected and r.reject_reason.startswith("HTTP 500")]


def profile_swap_s(profiles: Sequence[HardwareProfile]) -> dict[str, float]:
    """Each model's swap time in the profiles (what the planner and the simulator charge)."""
    return {p.model: p.weight_bytes / p.swap_bytes_s for p in profiles if p.swap_bytes_s > 0}


def swap_report(
    logs: Mapping[str, Mapping[str, Any]],
    live: Sequence[RequestRecord],
    trace: Sequence[AgreeRequest],
    profile_s: Mapping[str, float],
    sim_swaps: Mapping[str, int] | None,
) -> dict[str, Any]:
    """One stack's swaps: count, measured seconds, failures, lost requests and requests
    answered with a server error, against the profile's swap time and the simulator's count."""
    swaps = [s for log in logs.values() for s in log.get("swaps", [])]
    seconds = [float(s["seconds"]) for s in swaps if s.get("ok")]
    median = statistics.median(seconds) if seconds else None
    prof = statistics.median(profile_s.values()) if profile_s else None
    return {
        "live_swaps": len(swaps),
        "live_swaps_failed": sum(not s.get("ok") for s in swaps),
        "live_swap_s": seconds,
        "live_swap_median_s": median,
        "profile_swap_median_s": prof,
        "profile_over_live": None if not (median and prof) else prof / median,
        "failed_requests": sum(int(log.get("failed_requests", 0)) for log in logs.values()),
        "lost_requests": len(lost_requests(live, trace)),
        "error_requests": len(error_requests(live)),
        "rejected_requests": sum(r.rejected for r in live),
        "sim_swaps": None if sim_swaps is None else sum(sim_swaps.values()),
        "sim_swaps_by_instance": None if sim_swaps is None else dict(sim_swaps),
        **overlapping_swaps(logs),
        "by_replica": {k: dict(v) for k, v in logs.items()},
    }


def overlapping_swaps(logs: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The live swaps that ran while another replica swapped too (two engine restarts at once
    share the host's CPUs; the profile measured one at a time), and the median seconds of those
    and of the others; None where the replicas did not time their swaps' starts."""
    spans = [
        (name, float(s["started_unix_s"]), float(s["seconds"]))
        for name, log in logs.items()
        for s in log.get("swaps", [])
        if s.get("ok") and s.get("started_unix_s")
    ]
    if not spans:
        return {
            "live_swaps_overlapping": None,
            "overlapping_median_s": None,
            "alone_median_s": None,
        }
    together = [
        (name, t, d)
        for name, t, d in spans
        if any(o != name and t < t2 + d2 and t2 < t + d for o, t2, d2 in spans)
    ]
    alone = [d for name, t, d in spans if (name, t, d) not in together]
    return {
        "live_swaps_overlapping": len(together),
        "overlapping_median_s": statistics.median(d for _, _, d in together) if together else None,
        "alone_median_s": statistics.median(alone) if alone else None,
    }


def swaps_table(
    profile_file: Path,
    trace: Sequence[AgreeRequest],
    sim_swaps: Mapping[str, Mapping[str, int]],
    live_swaps: Mapping[str, Mapping[str, Mapping[str, Any]]],
    live_records: Mapping[str, Sequence[RequestRecord]],
) -> dict[str, Any]:
    """Each simulated stack's swap_report (live figures where it ran live), printed."""
    prof = profile_swap_s(load_profiles(profile_file))
    out = {
        p: swap_report(live_swaps.get(p, {}), live_records.get(p, []), trace, prof, n)
        for p, n in sim_swaps.items()
    }
    print("| stack | live swaps | live median s | profile s | failed | lost | sim swaps |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p, r in out.items():
        print(
            f"| {p} | {r['live_swaps']} | {_s(r['live_swap_median_s'])} | "
            f"{_s(r['profile_swap_median_s'])} | {r['failed_requests']} | "
            f"{r['lost_requests']} | {r['sim_swaps']} |"
        )
    return out


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"
