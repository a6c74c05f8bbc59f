"""The live side of `slomesh bench-agree`: each stack on its own freshly started mesh.

For each stack, one at a time: take the host's live lock (`--live-lock`, an flock file other
live users share; held only while this stack's mesh runs), stop any Ray left on the host, start
the mesh of deploy/ray/local.yaml as `slomesh up --stack` would (`live_config`), warm it up,
replay the trace with the open-loop client (slomesh/bench/agree/live.py), stop the mesh and Ray,
release the lock. Every stack gets a fresh mesh, even where the engine arguments of two stacks
are the same: the trace's prompts are the same for every stack, and a reused vLLM engine would
serve the second stack's prefills from the first stack's prefix cache.

Before each stack's trace its own mesh serves the calibration traces (one per calibration rate,
seeds of their own, never the measured trace's), on which that stack's simulated profile is
calibrated (slomesh/bench/agree/calibrate.py): the mesh's CPU per admitted request shares the
engines' cores, so each stack's admission leaves its engines a speed of its own. After the
trace, with `host_speed_window_s` > 0, the profile's decode step is fitted again on the trace's
own streams and the host's speed over the trace is measured per window
(slomesh/bench/agree/host_speed.py): the simulator then runs at the speed the engines ran the
trace at, from second to second.

The client runs in this process at a raised CPU priority while it replays (`client_nice`, after
the mesh's processes have started, so they keep the priority they were started with): on a
small host a client waiting for a core stamps its wait into every TTFT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.domain import HardwareProfile
from shared.metrics.records import RequestRecord
from slomesh.bench.agree.admission_hop import AdmissionHops, admission_hops
from slomesh.bench.agree.calibrate import calibrated, loop_delay
from slomesh.bench.agree.host_speed import calibrated_on_trace
from slomesh.bench.agree.mesh_calls import swap_logs
from slomesh.bench.agree.report_delay import report_delays
from slomesh.bench.agree.workload import AgreeRequest, AgreeWorkloadSpec
from slomesh.cli.bench_live import _served_model, _with_seats
from slomesh.launch import mesh, readiness
from slomesh.sim.host_speed import HostSpeed
from slomesh.sim.ingress import SimIngressConfig
from slomesh.sim.scheduler import SimAdmissionConfig
from slomesh.stacks import load_stack
from slomesh.stacks.live import apply_stack


def qlm_options(args: argparse.Namespace, options: dict[str, Any]) -> dict[str, Any]:
    """A qlm stack's options as bench-agree runs it on both sides: QLM's average running batch
    (its group split threshold is that times δ) is the replicas' seats, and --qlm-widen."""
    grouping = {**options.get("grouping", {}), "avg_batch_size": args.max_num_seqs}
    out = {**options, "grouping": grouping}
    if args.qlm_widen:
        out["rwt_error"] = {**options.get("rwt_error", {}), "widen": True}
    return out


def _classes_config(spec: AgreeWorkloadSpec) -> dict[str, Any]:
    return {
        "classes": {c.name: {"ttft_ms": c.ttft_s * 1e3} for c in spec.classes},
        "default_class": spec.classes[0].name,
    }


def live_config(
    args: argparse.Namespace, spec: AgreeWorkloadSpec, stack: str | None
) -> dict[str, Any]:
    """deploy/ray/local.yaml (or the --scenario's shipped config, `args.scenario_config`, with
    its own replicas and seats) as `bench-agree` runs `stack` (None: the config's own): replica
    seats and the scheduler's view of them from --max-num-seqs, the measured profile published,
    the stack applied, the workload's SLO classes at the ingress. The ingress's own admission
    (delivered-latency guard, reject hold-off) runs as `slomesh up` runs it, and the simulator
    runs it too (`sim_admission`). The mesh's limits that the simulator does not run are lifted
    above the trace: the proxy queue, the ingress's concurrency and admission wait; so are the
    scheduler's in-flight cap and global-queue wait, which the simulator runs as set here."""
    if getattr(args, "scenario_config", None) is not None:  # a scenario's mesh, as shipped
        config = mesh.load_config(args.scenario_config)
    else:
        config = with_replicas(mesh.load_config(mesh.CONFIGS["vllm"]), args.replicas)
        config = _with_seats(config, args.max_num_seqs)
    config = mesh.with_profiles(config, [args.profile])
    if stack is not None:
        config = apply_stack(config, load_stack(stack))
    loosest_ms = max(c.ttft_s for c in spec.classes) * 1e3
    for app in config["applications"]:
        a = app.setdefault("args", {})
        if app["name"].startswith("replica-"):
            a["vllm"] = {**a["vllm"], "max_num_batched_tokens": args.max_num_batched_tokens}
        elif app["name"] == "ingress":
            a["slo"] = _classes_config(spec)
            a["max_ongoing_requests"] = max(64, spec.requests)
            a["max_queued_at_proxy"] = max(32, spec.requests)
            a["admit_timeout_s"] = loosest_ms / 1e3
            a["replica_accept_timeout_s"] = 30.0
        elif app["name"] == "scheduler":
            a["max_queue_wait_ms"] = loosest_ms
            a["max_in_flight_per_replica"] = max(64, spec.requests)
            if a.get("policy") == "qlm":
                a["policy_options"] = qlm_options(args, a["policy_options"])
    return config


def sim_admission(config: dict[str, Any]) -> tuple[SimAdmissionConfig, SimIngressConfig]:
    """The scheduler's and the ingress's admission settings of the mesh `config`, as the
    simulator runs them; arrivals reach the ingress replicas as Serve's proxy routes them
    (power of two choices on requests in flight)."""
    apps = {app["name"]: app.get("args", {}) for app in config["applications"]}
    sched = apps.get("scheduler", {})
    admission = SimAdmissionConfig.model_validate(
        {k: sched[k] for k in SimAdmissionConfig.model_fields if k in sched}
    )
    ingress = SimIngressConfig.of_args(apps.get("ingress", {}))
    return admission, ingress.model_copy(update={"routing": "fewest-ongoing"})


def predictor_of(config: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The predictor the mesh `config`'s predictor application runs: its name and config."""
    from services.predictor.deployment import PredictorArgs

    apps = {app["name"]: app.get("args", {}) for app in config["applications"]}
    parsed = PredictorArgs.model_validate(apps.get("predictor", {}))
    return parsed.predictor, parsed.core_config()


def with_replicas(config: dict[str, Any], replicas: int | None) -> dict[str, Any]:
    """`config` with `replicas` copies of its first vLLM replica application (replica-0,
    replica-1, ...) in the scheduler's replica list too; None: as it is. With more than one,
    no copy keeps the first one's pinned CPUs (`vllm.engine_cpus`): engines pinned to the same
    CPUs would share one core."""
    if replicas is None:
        return config
    apps = config["applications"]
    first = next(a for a in apps if a["name"].startswith("replica-"))
    copies = []
    for k in range(replicas):
        app = copy.deepcopy(first)
        app["name"] = f"replica-{k}"
        app["route_prefix"] = f"/replica-{k}"
        app["args"]["application"] = f"replica-{k}"
        if replicas > 1 and isinstance(app["args"].get("vllm"), dict):
            app["args"]["vllm"].pop("engine_cpus", None)
        copies.append(app)
    rest = [a for a in apps if not a["name"].startswith("replica-")]
    out = {**config, "applications": copies + rest}
    for app in rest:
        if app["name"] == "scheduler":
            entry = dict(app["args"]["replicas"][0])
            app["args"]["replicas"] = [
                {**entry, "application": f"replica-{k}"} for k in range(replicas)
            ]
    return out


def replicas_of(config: dict[str, Any]) -> int:
    return sum(a["name"].startswith("replica-") for a in config["applications"])


def prompt_builder() -> Any:
    from transformers import AutoTokenizer

    from services.replica.vllm.tiny_model import (
        _SYLLABLES_TEXT,
        _WORDS_TEXT,
        build_tiny_model,
        default_tiny_model_dir,
    )
    from slomesh.bench.agree.prompts import PromptBuilder

    path = default_tiny_model_dir()
    build_tiny_model(path)
    tok = AutoTokenizer.from_pretrained(str(path))
    return PromptBuilder(lambda s: tok(s)["input_ids"], f"{_WORDS_TEXT} {_SYLLABLES_TEXT}".split())


@contextlib.contextmanager
def live_lock(path: Path | None) -> Iterator[None]:
    """Hold the host's live lock (flock on `path`, as flock(1) takes it); None: no lock."""
    if path is None:
        yield
        return
    with path.open("a") as f:
        t = time.monotonic()
        fcntl.flock(f, fcntl.LOCK_EX)
        print(f"# live lock {path} taken after {time.monotonic() - t:.0f} s", flush=True)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ray_stop() -> None:
    """`ray stop --force`: no Ray process of an earlier or this run outlives a stack's run."""
    ray = Path(sys.executable).with_name("ray")
    subprocess.run([str(ray), "stop", "--force"], capture_output=True, check=False)


@contextlib.contextmanager
def priority(increment: int) -> Iterator[None]:
    """This thread's niceness changed by `increment` inside the block, restored after."""
    changed = 0
    if increment:
        try:
            os.nice(increment)
            changed = increment
        except OSError as err:
            print(f"# client priority unchanged (nice {increment}: {err.strerror})", flush=True)
    try:
        yield
    finally:
        if changed:
            os.nice(-changed)


@dataclass
class LiveResults:
    records: dict[str, list[RequestRecord]] = field(default_factory=dict)
    scored: dict[str, list[ScoredWait]] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, HardwareProfile] = field(default_factory=dict)
    """stack -> the profile calibrated on its live mesh (none when calibration is off)."""
    loop_lags: dict[str, float] = field(default_factory=dict)
    """stack -> the ingress loop's delay its calibration measured, s (calibrate.loop_delay)."""
    speeds: dict[str, HostSpeed] = field(default_factory=dict)
    """stack -> the host's speed over its measured trace (agree/host_speed.py; none with
    `host_speed_window_s` 0)."""
    swaps: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """stack -> replica -> its SwapLog at the end of the run (or {"error": ...})."""
    report_delays: dict[str, list[float]] = field(default_factory=dict)
    """stack -> the delays from each stream's end to its report reaching the scheduler's books
    over its trace, s (the scheduler's report log: slomesh/bench/agree/report_delay.py)."""
    hops: dict[str, AdmissionHops] = field(default_factory=dict)
    """stack -> its trace's hops from the ingress to the scheduler's admission check (the same
    log: slomesh/bench/agree/admission_hop.py)."""


def run_live(
    args: argparse.Namespace,
    spec: AgreeWorkloadSpec,
    trace: Sequence[AgreeRequest],
    calibration: Mapping[float, Sequence[AgreeRequest]],
    profile: HardwareProfile,
    out: Path,
    done: Callable[[str, LiveResults], None],
) -> LiveResults:
    """Every stack of `args.stacks` live, one at a time (module docstring); `done(stack,
    results so far)` after each, outside the lock."""
    from slomesh.bench.agree.live import warm_up

    builder = prompt_builder()
    res = LiveResults()
    for stack in args.stacks:
        config = live_config(args, spec, stack)
        log, reports = out / f"rwt-{stack}.jsonl", out / f"reports-{stack}.jsonl"
        for app in config["applications"]:
            if app["name"] == "scheduler":
                app["args"]["rwt_log_file"] = str(log.resolve())
                app["args"]["report_log_file"] = str(reports.resolve())
        cal: dict[float, list[RequestRecord]] = {}
        with live_lock(args.live_lock):
            ray_stop()
            load0 = os.getloadavg()
            try:
                log.unlink(missing_ok=True)
                reports.unlink(missing_ok=True)  # the calibration's lines stay: the base hop
                # ready as `slomesh up` makes it (every replica, then the models the replicas
                # start on: the simulator starts there), and warm on those models only
                started = mesh.start(config)
                base = mesh.openai_url(config).removesuffix("/v1")
                model = _served_model(config)
                for m in readiness.start_models(config):
                    asyncio.run(warm_up(base, m, builder.build(32, 1)))
                windows: dict[str, tuple[float, float]] = {}
                if calibration:
                    for rate, reqs in calibration.items():
                        t_cal = time.time()
                        cal[rate] = _send(builder, base, model, reqs, args.client_nice)
                        windows[f"{rate:g}"] = (t_cal, time.time())
                        raw_cal = json.dumps([asdict(r) for r in cal[rate]])
                        (out / f"live-calibration-{stack}-{rate:g}.json").write_text(raw_cal)
                t, t_unix, origin = time.monotonic(), time.time(), list[float]()
                res.records[stack] = _send(builder, base, model, trace, args.client_nice, origin)
                wall = time.monotonic() - t
                time.sleep(1.0)  # the last Reports reach the scheduler's log
                load1 = os.getloadavg()
                res.swaps[stack] = swap_logs(config)
            finally:
                mesh.stop(config)
                ray_stop()
        # each stack's records as soon as they exist (a run cut short keeps what it measured)
        raw = [asdict(r) for r in res.records[stack]]
        (out / f"live-{stack}.json").write_text(json.dumps(raw))
        res.env[stack] = {
            "start_s": started,
            "run_s": wall,
            "loadavg_before": load0,
            "loadavg_after": load1,
            "trace_start_unix_s": t_unix,
            "trace_origin_unix_s": origin[0],
            "calibration_unix_s": windows,
        }
        derive(args, spec, trace, profile, replicas_of(config), stack, cal, res, out)
        print(
            f"# live {stack}: {wall:.0f} s (start {started:.0f} s), loadavg "
            f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} -> "
            f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}",
            flush=True,
        )
        done(stack, res)
    return res


def derive(
    args: argparse.Namespace,
    spec: AgreeWorkloadSpec,
    trace: Sequence[AgreeRequest],
    profile: HardwareProfile,
    replicas: int,
    stack: str,
    cal: Mapping[float, Sequence[RequestRecord]],
    res: LiveResults,
    out: Path,
) -> None:
    """What `stack`'s live run in `res` (its records), its calibration traces' records `cal`
    and files in `out` (its scheduler's logs) give its simulation: the calibrated profile
    and the ingress loop's delay; the profile fitted again on the trace and the host's speed
    over it (with `host_speed_window_s` > 0); the scored waits, the report delays and the
    admission hops."""
    loop_note = ""
    if cal:
        prof = calibrated(profile, cal, replicas, args.max_num_seqs, spec.rate_rps)
        lag = res.loop_lags[stack] = loop_delay(cal, spec.rate_rps)
        loop_note = f"the guard's ingress loop delay {lag:.3f} s"
        res.profiles[stack] = prof = replace(prof, source=f"{prof.source}; {loop_note}")
        print(f"# calibrated {stack}: {prof.source}", flush=True)
    window = args.host_speed_window_s
    if cal and window > 0:  # the engines' speed over the trace itself
        prof, speed = calibrated_on_trace(
            profile,
            cal,
            res.records[stack],
            replicas,
            args.max_num_seqs,
            spec.rate_rps,
            window,
            min(r.arrival_s for r in trace),
        )
        res.profiles[stack] = replace(prof, source=f"{prof.source}; {loop_note}")
        if speed is not None:
            res.speeds[stack] = speed
    res.scored[stack] = _read_log(out / f"rwt-{stack}.jsonl")
    since = res.env.get(stack, {}).get("trace_start_unix_s", 0.0)  # calibration's left out
    res.report_delays[stack] = report_delays(out / f"reports-{stack}.jsonl", since)
    res.hops[stack] = admission_hops(out / f"reports-{stack}.jsonl", trace, res.env.get(stack, {}))


def _send(
    builder: Any,
    base: str,
    model: str,
    reqs: Sequence[AgreeRequest],
    nice: int,
    origin: list[float] | None = None,
) -> list[RequestRecord]:
    """Replay `reqs` on the mesh at `base` with the client's priority changed by `nice`; the
    wall time of the replay's offset 0 is appended to `origin`."""
    from slomesh.bench.agree.live import replay

    def prompt(r: AgreeRequest) -> str:
        text: str = builder.build(r.prompt_tokens, r.prompt_seed)
        return text

    with priority(nice):
        started = origin.append if origin is not None else None
        return asyncio.run(replay(base, model, reqs, prompt, started=started))


def _read_log(path: Path) -> list[ScoredWait]:
    if not path.exists():
        return []
    return [ScoredWait(**json.loads(x)) for x in path.read_text().splitlines() if x.strip()]
