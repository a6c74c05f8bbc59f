"""`slomesh bench-agree`: the same seeded open-loop workload on the live mesh (real vLLM CPU
replicas) and on the simulator (the measured CPU profile calibrated on the live mesh), per
stack; attainment per stack and class side by side, whether the ranking agrees, and the QLM
waiting-time estimator's R² on both sides (slomesh/bench/agree/).

Live (slomesh/cli/bench_agree_live.py): each stack on a fresh mesh of deploy/ray/local.yaml
started as `slomesh up --stack S` would (the limits the simulator does not run lifted above
the trace), one at a time under the host's live lock; one calibration trace per
--calibrate-rate, served by each stack's own mesh before its trace, calibrates that stack's
profile (slomesh/bench/agree/calibrate.py); its decode step is then fitted on the trace itself
and the host's speed over the trace measured (--host-speed-window, agree/host_speed.py).
Sim, after each stack's live run: the same requests, replica count, engine limits and stack on
`ProfiledSimulator` with the calibrated profile (--sim-only: --profile as given), its scheduler
planning with --profile as the live one does, behind the live config's scheduler and ingress
admission (the ingress's delivered-latency guard and reject hold-off included:
slomesh/sim/ingress.py). Reports and exits 0; it does not assert targets.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles, save_profiles
from slomesh.bench.agree.admission_hop import AdmissionHops
from slomesh.bench.agree.admission_hop import describe as describe_hops
from slomesh.bench.agree.hints import plans_on_hints, with_live_hints
from slomesh.bench.agree.load_overlap import fit_load_slowdown
from slomesh.bench.agree.outcomes import outcomes
from slomesh.bench.agree.page import update_page
from slomesh.bench.agree.report_delay import describe, live_view, with_fast_path_call
from slomesh.bench.agree.scenario import (
    LiveScenario,
    apply_scenario,
    profile_swap_s,
    scenario_trace,
    scenario_workload,
    simulate_scenario,
    swaps_table,
)
from slomesh.bench.agree.sim import simulate
from slomesh.bench.agree.spread import median_run
from slomesh.bench.agree.workload import (
    AgreeRequest,
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.cli.bench_agree_args import add_sim_args, calibrate_rates, command_line, sim_seeds
from slomesh.cli.bench_agree_live import (
    LiveResults,
    live_config,
    predictor_of,
    priority,
    prompt_builder,
    qlm_options,
    replicas_of,
    run_live,
    sim_admission,
    with_replicas,
)
from slomesh.cli.bench_agree_report import report as _report
from slomesh.cli.bench_agree_reuse import reuse_live
from slomesh.cli.errors import UsageError
from slomesh.launch import mesh
from slomesh.sim.host_speed import HostSpeed
from slomesh.stacks import STACKS
from slomesh.stacks.live import StackRefused

DEFAULT_CLASSES = "short:0.4:3:16:32-128,long:0.6:3600:256:64-256"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench-agree", help="one seeded workload on the live mesh and the simulator; compare"
    )
    stacks_help = "comma-separated stacks (names or stack files)"
    p.add_argument("--stacks", default="vllm-fcfs,edf,qlm-recompute,slomesh", help=stacks_help)
    p.add_argument(
        "--scenario",
        help="a scenario with a shipped live mesh (many-models): its workload at --rate is the "
        "trace, its config the live mesh and its cluster the simulated one; --classes, "
        "--replicas, seats, token budget and --profile are the scenario's, no calibration "
        "(slomesh/bench/agree/scenario.py); the report adds each stack's swaps",
    )
    p.add_argument("--requests", type=int, default=300, help="requests in the trace")
    p.add_argument("--rate", type=float, default=20.0, help="Poisson arrivals per s")
    p.add_argument("--seed", type=int, default=0, help="trace and prompt seed")
    p.add_argument(
        "--classes",
        default=DEFAULT_CLASSES,
        help="name:weight:ttft_s:output_tokens:prompt_min-prompt_max,... "
        f"(default {DEFAULT_CLASSES})",
    )
    p.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="vLLM replicas (both sides): copies of deploy/ray/local.yaml's first replica",
    )
    p.add_argument("--max-num-seqs", type=int, default=2, help="seats per replica (both sides)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048, help="per-step budget")
    p.add_argument("--profile", type=Path, default=mesh.DEFAULT_PROFILES["vllm"])
    p.add_argument("--tie-points", type=float, default=1.0, help="rank ties within this")
    p.add_argument("--min-groups", type=int, default=4, help="RWT R² over waits behind >= this")
    p.add_argument("--qlm-widen", action="store_true", help="qlm acts on the widened quantile")
    p.add_argument("--sim-only", action="store_true", help="skip the live mesh")
    p.add_argument(
        "--calibrate-requests",
        type=int,
        default=40,
        help="live: requests of each calibration trace run before each stack's trace on its "
        "mesh, on which that stack's simulated profile is calibrated (0: simulate with "
        "--profile as it is)",
    )
    p.add_argument(
        "--calibrate-rate",
        default="1",
        help="comma-separated arrivals per s of the calibration traces, one trace per rate (two "
        "or more fit the decode step's growth with the rate offered; include the trace's own)",
    )
    p.add_argument(
        "--host-speed-window",
        dest="host_speed_window_s",
        type=float,
        default=1.0,
        help="live: seconds per window of the host's speed measured over each stack's trace and "
        "replayed by the simulated replicas, whose decode step is then fitted on the trace "
        "itself (slomesh/bench/agree/host_speed.py); 0: the calibration traces' step throughout",
    )
    p.add_argument(
        "--live-lock",
        type=Path,
        help="flock file held around each stack's live run (shared hosts), e.g. "
        "/tmp/slomesh-live.lock",
    )
    p.add_argument(
        "--client-nice",
        type=int,
        default=-10,
        help="niceness change of the live client while it replays (raised priority: a client "
        "waiting for a core stamps its wait into every TTFT)",
    )
    add_sim_args(p)
    p.add_argument("--out", type=Path, help="write DIR/agree.json (default runs/bench-agree)")
    p.add_argument(
        "--page",
        type=Path,
        help="also merge each stack's figures into this generated page (e.g. "
        "docs/results/agreement.md; its data in the same path with .json) and render it",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    args.stacks = [p.strip() for p in args.stacks.split(",") if p.strip()]
    if len(args.stacks) < 2 and args.page is None:
        raise UsageError("--stacks: give at least 2 stacks to rank (or --page to rank there)")
    if args.max_num_seqs < 1 or args.max_num_batched_tokens < 1 or args.replicas < 1:
        raise UsageError("--replicas, --max-num-seqs and --max-num-batched-tokens must be >= 1")
    stacks = {p: STACKS.create(p) for p in args.stacks}
    scen = _scenario(args)
    if scen is not None:
        spec = scenario_workload(scen.spec, args.requests, args.rate)
        trace = scenario_trace(scen.spec, args.requests, args.rate, args.seed)
    else:
        spec = AgreeWorkloadSpec(
            classes=parse_classes(args.classes), requests=args.requests, rate_rps=args.rate
        )
        trace = generate_agree_workload(spec, args.seed)
    args.calibrate_rates = calibrate_rates(args.calibrate_rate)
    args.sim_seeds = sim_seeds(args.sim_seeds)
    calibration: dict[float, list[AgreeRequest]] = {}
    if args.calibrate_requests > 0:
        for k, rate in enumerate(args.calibrate_rates):
            cal_spec = spec.model_copy(
                update={"requests": args.calibrate_requests, "rate_rps": rate}
            )
            calibration[rate] = generate_agree_workload(cal_spec, args.seed + 1 + k)
    profile = load_profiles(args.profile)[0]
    replicas = replicas_of(
        mesh.load_config(scen.config)
        if scen is not None
        else with_replicas(mesh.load_config(mesh.CONFIGS["vllm"]), args.replicas)
    )
    out = args.out or Path("runs/bench-agree")
    out.mkdir(parents=True, exist_ok=True)
    engine = EngineConfig(
        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens
    )
    builder = functools.cache(prompt_builder)  # built once, by the first stack needing it

    def prompt_of(r: AgreeRequest) -> str:
        return str(builder().build(r.prompt_tokens, r.prompt_seed))

    sim: dict[str, list[RequestRecord]] = {}
    sim_scored: dict[str, list[ScoredWait]] = {}
    sim_swaps: dict[str, dict[str, int]] = {}
    sim_seeds_pct: dict[str, list[float]] = {}
    sim_on_credit: dict[str, int] = {}

    def simulated(
        p: str,
        prof: HardwareProfile,
        loop_lag_s: float = 0.0,
        speed: HostSpeed | None = None,
        delays: Sequence[float] = (),
        swaps: dict[str, dict[str, Any]] | None = None,
        hops: AdmissionHops | None = None,
    ) -> HardwareProfile:
        """`p` simulated once per --sim-seeds seed (the median seed's run is kept); its profile
        as the page describes it (with the policy's view). `swaps`: the live replicas' swap
        logs (a scenario's loads at once slow each other as they did there); `hops`: the
        admission hops measured live (slomesh/bench/agree/admission_hop.py)."""
        stack = stacks[p]
        if stack.policy == "qlm":
            stack = stack.with_policy_options(qlm_options(args, stack.policy_options))
        try:
            config = live_config(args, spec, p)
        except StackRefused:  # not live (--sim-only): the mesh's settings without the stack
            config = live_config(args, spec, None)
        admission, ingress = sim_admission(config)
        ingress = with_fast_path_call(ingress, delays)
        books = args.policy_view == "books"
        span = max(r.arrival_s for r in trace) - min(r.arrival_s for r in trace)
        view = f"the policy reads the scheduler's books ({describe(delays, span, replicas)})"
        if hops is not None:
            view = f"{view}; {describe_hops(hops)}"
        if scen is not None:
            fit = fit_load_slowdown(swaps or {}, profile_swap_s(load_profiles(args.profile)))
            scen_runs = [
                simulate_scenario(
                    scen.spec,
                    stack,
                    trace,
                    admission,
                    ingress.model_copy(update={"routing_seed": seed}),
                    load_slowdown=fit.slowdown,
                    view=live_view(config, delays, seed) if books else None,
                )
                for seed in args.sim_seeds
            ]
            run_, sim_seeds_pct[p] = median_run([r for r, _ in scen_runs])
            sim_swaps[p] = next(made for r, made in scen_runs if r is run_)
            prof = replace(prof, source=f"{prof.source}; {view if books else 'the engines'}")
            if fit.overlapping:
                loads = f"loads at once slowed {fit.slowdown:.2f} per other load"
                fitted = f"fitted on {fit.overlapping} overlapping live swaps"
                prof = replace(prof, source=f"{prof.source}; {loads}, {fitted}")
        else:
            requests = [r.to_request(prof.model) for r in trace]
            if plans_on_hints(stack):  # the live predictor's hints (agree/hints.py)
                warm, found = calibration.values(), predictor_of(config)
                requests = with_live_hints(requests, trace, warm, prompt_of, *found)
            runs = [
                simulate(
                    prof,
                    replicas,
                    engine,
                    stack,
                    requests,
                    admission,
                    ingress.model_copy(update={"routing_seed": seed}),
                    loop_lag_s,
                    speed,
                    live_view(config, delays, seed, hops) if books else None,
                    planning=profile,  # the file the live scheduler plans with
                )
                for seed in args.sim_seeds
            ]
            run_, sim_seeds_pct[p] = median_run(runs)
            prof = replace(prof, source=f"{prof.source}; {view if books else 'the engines'}")
            if run_.on_credit is not None:
                sim_on_credit[p] = run_.on_credit
                call_ms = ingress.fast_path.call_s * 1e3
                note = f"{run_.on_credit} placed on lease credits (Sync {call_ms:.1f} ms each way)"
                prof = replace(prof, source=f"{prof.source}; {note}")
        sim[p], sim_scored[p] = run_.records, run_.scored_waits
        (out / f"sim-{p}.json").write_text(json.dumps([asdict(r) for r in sim[p]]))
        return prof

    def publish(res: LiveResults | None, prof: HardwareProfile) -> None:
        live = res.records if res is not None else {}
        report = _report(
            args,
            spec,
            sim,
            sim_scored,
            live,
            res.scored if res is not None else {},
            res.env if res is not None else {},
            replicas,
        )
        report["profile"] = prof.source
        report["sim_seeds_pct"] = sim_seeds_pct
        report["sim_on_credit"] = sim_on_credit
        report["outcomes"] = {
            p: {"live": outcomes(live[p]), "sim": outcomes(sim[p])} for p in live if p in sim
        }
        if res is not None:
            report["profiles"] = {s: p.source for s, p in res.profiles.items()}
        if scen is not None:
            report["swaps"] = _swaps(args, trace, sim_swaps, res)
        (out / "agree.json").write_text(json.dumps(report, indent=2))
        print(f"wrote {out / 'agree.json'}")
        if args.page is not None:
            update_page(args.page, report, command_line(args))
            print(f"wrote {args.page}")

    if args.sim_only:
        for p in stacks:
            simulated(p, profile)
        publish(None, profile)
        return 0

    def stack_done(p: str, res: LiveResults) -> None:
        # each stack's simulated run (at a low CPU priority: the host is shared) and the page
        # as soon as its live run is in (a run cut short keeps what it measured), on the
        # profile calibrated on the stack's own mesh
        prof = res.profiles.get(p, profile)
        if p in res.profiles:
            save_profiles(out / f"calibrated-profile-{p}.json", [prof])
            print(f"wrote {out / f'calibrated-profile-{p}.json'} ({prof.source})")
        with priority(15):
            delays = res.report_delays.get(p, [])
            res.profiles[p] = simulated(
                p,
                prof,
                res.loop_lags.get(p, 0.0),
                res.speeds.get(p),
                delays,
                res.swaps.get(p),
                res.hops.get(p),
            )
        publish(res, prof)

    if args.reuse_live is not None:
        try:
            res = reuse_live(args, spec, trace, profile, replicas)
        except ValueError as err:
            raise UsageError(str(err)) from None
        for p in res.records:
            stack_done(p, res)
        return 0
    run_live(args, spec, trace, calibration, profile, out, stack_done)
    return 0


def _scenario(args: argparse.Namespace) -> LiveScenario | None:
    try:
        return apply_scenario(args)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _swaps(
    args: argparse.Namespace,
    trace: list[AgreeRequest],
    sim_swaps: dict[str, dict[str, int]],
    res: LiveResults | None,
) -> dict[str, Any]:
    live = res if res is not None else LiveResults()
    return swaps_table(args.profile, trace, sim_swaps, live.swaps, live.records)
