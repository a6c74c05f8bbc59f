"""`slomesh bench-agree`: the same seeded open-loop workload on the live mesh (real vLLM CPU
replicas) and on the simulator (the measured CPU profile), per policy; attainment per policy and
class side by side, whether the policy ranking agrees, and the QLM waiting-time estimator's R²
on both sides (slomesh/bench/agree/).

Live: for each policy the mesh of deploy/ray/local.yaml starts as `slomesh up --stack P` would
(replica seats and the scheduler's view of them from --max-num-seqs, the measured profile
published, the workload's SLO classes configured at the ingress; the mesh's overload limits --
proxy queue, ingress concurrency and admission wait, the scheduler's in-flight cap and
global-queue wait -- lifted above the trace, so only SLOs and the policy reject, as in the
simulator), the client replays the trace, the mesh stops. Sim: the same requests, replica
count, engine limits and stack on `ProfiledSimulator`. Reports and exits 0; it does not
assert the targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.compare import (
    ALL,
    max_spread,
    ranking,
    rankings_agree,
    rwt_score,
    side_by_side,
)
from slomesh.bench.agree.page import update_page
from slomesh.bench.agree.sim import simulate
from slomesh.bench.agree.workload import (
    AgreeRequest,
    AgreeWorkloadSpec,
    generate_agree_workload,
    parse_classes,
)
from slomesh.cli import mesh
from slomesh.cli.bench_live import _served_model, _with_seats
from slomesh.cli.errors import UsageError
from slomesh.stacks import STACKS, load_stack
from slomesh.stacks.live import apply_stack

DEFAULT_CLASSES = "short:0.4:3:16:32-128,long:0.6:3600:256:64-256"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench-agree", help="one seeded workload on the live mesh and the simulator; compare"
    )
    p.add_argument(
        "--stacks",
        "--policies",
        dest="policies",
        default="vllm-fcfs,edf,qlm-recompute,slomesh",
        help="comma-separated stacks (names or stack files)",
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
    p.add_argument("--max-num-seqs", type=int, default=2, help="seats per replica (both sides)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048, help="per-step budget")
    p.add_argument("--profile", type=Path, default=mesh.DEFAULT_PROFILES["vllm"])
    p.add_argument("--tie-points", type=float, default=1.0, help="rank ties within this")
    p.add_argument("--min-groups", type=int, default=4, help="RWT R² over waits behind >= this")
    p.add_argument("--qlm-widen", action="store_true", help="qlm acts on the widened quantile")
    p.add_argument("--sim-only", action="store_true", help="skip the live mesh")
    p.add_argument("--out", type=Path, help="write DIR/agree.json")
    p.add_argument(
        "--page",
        type=Path,
        help="also merge each stack's figures into this generated page (e.g. "
        "docs/results/agreement.md; its data in the same path with .json) and render it",
    )
    p.set_defaults(func=run)


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


def live_config(args: argparse.Namespace, spec: AgreeWorkloadSpec, policy: str) -> dict[str, Any]:
    """deploy/ray/local.yaml as `bench-agree` runs it for `policy` (see the module docstring)."""
    config = _with_seats(mesh.load_config(mesh.CONFIGS["vllm"]), args.max_num_seqs)
    config = mesh.with_profiles(config, [args.profile])
    config = apply_stack(config, load_stack(policy))
    loosest_ms = max(c.ttft_s for c in spec.classes) * 1e3
    for app in config["applications"]:
        a = app.setdefault("args", {})
        if app["name"].startswith("replica-"):
            a["vllm"] = {**a["vllm"], "max_num_batched_tokens": args.max_num_batched_tokens}
        elif app["name"] == "ingress":
            a["slo"] = _classes_config(spec)
            # the mesh's own overload limits (proxy queue, admission wait, in-flight caps) are
            # lifted above the trace: only SLOs and the policy reject, as in the simulator
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


def _replicas(config: dict[str, Any]) -> int:
    return sum(a["name"].startswith("replica-") for a in config["applications"])


def _prompt_builder() -> Any:
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


def _run_live(
    args: argparse.Namespace, spec: AgreeWorkloadSpec, trace: list[AgreeRequest], out: Path
) -> tuple[dict[str, list[RequestRecord]], dict[str, list[ScoredWait]], dict[str, Any]]:
    from slomesh.bench.agree.live import replay, warm_up

    builder = _prompt_builder()
    records, scored, env = {}, {}, {}
    for policy in args.policies:
        config = live_config(args, spec, policy)
        log = out / f"rwt-{policy}.jsonl"
        log.unlink(missing_ok=True)
        for app in config["applications"]:
            if app["name"] == "scheduler":
                app["args"]["rwt_log_file"] = str(log.resolve())
        load0 = os.getloadavg()
        try:
            started = mesh.start(config)
            http, _ = mesh.endpoints(config)
            base = http.removesuffix("/v1")
            model = _served_model(config)
            asyncio.run(warm_up(base, model, builder.build(32, 1)))
            t = time.monotonic()
            records[policy] = asyncio.run(
                replay(base, model, trace, lambda r: builder.build(r.prompt_tokens, r.prompt_seed))
            )
            wall = time.monotonic() - t
            time.sleep(1.0)  # the last Reports reach the scheduler's log
        finally:
            mesh.stop()
        scored[policy] = _read_log(log)
        # each policy's records as soon as they exist (a run cut short keeps what it measured)
        raw = [asdict(r) for r in records[policy]]
        (out / f"live-{policy}.json").write_text(json.dumps(raw))
        env[policy] = {"start_s": started, "run_s": wall, "loadavg_before": load0}
        env[policy]["loadavg_after"] = os.getloadavg()
        print(f"# live {policy}: {wall:.0f} s, loadavg {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    return records, scored, env


def _read_log(path: Path) -> list[ScoredWait]:
    if not path.exists():
        return []
    return [ScoredWait(**json.loads(x)) for x in path.read_text().splitlines() if x.strip()]


def run(args: argparse.Namespace) -> int:
    args.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if len(args.policies) < 2 and args.page is None:
        raise UsageError("--stacks: give at least 2 stacks to rank (or --page to rank there)")
    if args.max_num_seqs < 1 or args.max_num_batched_tokens < 1:
        raise UsageError("--max-num-seqs and --max-num-batched-tokens must be >= 1")
    stacks = {p: STACKS.create(p) for p in args.policies}
    spec = AgreeWorkloadSpec(
        classes=parse_classes(args.classes), requests=args.requests, rate_rps=args.rate
    )
    trace = generate_agree_workload(spec, args.seed)
    profile = load_profiles(args.profile)[0]
    replicas = _replicas(mesh.load_config(mesh.CONFIGS["vllm"]))
    engine = EngineConfig(
        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens
    )
    sim, sim_scored = {}, {}
    for p, stack in stacks.items():
        if stack.policy == "qlm":
            stack = stack.with_policy_options(qlm_options(args, stack.policy_options))
        run_ = simulate(
            profile, replicas, engine, stack, [r.to_request(profile.model) for r in trace]
        )
        sim[p], sim_scored[p] = run_.records, run_.scored_waits
    out = args.out or Path("runs/bench-agree")
    out.mkdir(parents=True, exist_ok=True)
    live: dict[str, list[RequestRecord]] = {}
    live_scored: dict[str, list[ScoredWait]] = {}
    env: dict[str, Any] = {}
    if not args.sim_only:
        live, live_scored, env = _run_live(args, spec, trace, out)
    report = _report(args, spec, sim, sim_scored, live, live_scored, env, replicas)
    if args.out is not None:
        (args.out / "agree.json").write_text(json.dumps(report, indent=2))
        print(f"wrote {args.out / 'agree.json'}")
    if args.page is not None:
        update_page(args.page, report, _command(args))
        print(f"wrote {args.page}")
    return 0


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (the page lists it)."""
    parts = [
        "slomesh bench-agree",
        f"--stacks {','.join(args.policies)}",
        f"--requests {args.requests}",
        f"--rate {args.rate:g}",
        f"--seed {args.seed}",
        f"--classes {args.classes}",
        f"--max-num-seqs {args.max_num_seqs}",
        f"--max-num-batched-tokens {args.max_num_batched_tokens}",
    ]
    parts += ["--sim-only"] * args.sim_only + [f"--page {args.page}"]
    return " ".join(parts)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _report(
    args: argparse.Namespace,
    spec: AgreeWorkloadSpec,
    sim: dict[str, list[RequestRecord]],
    sim_scored: dict[str, list[ScoredWait]],
    live: dict[str, list[RequestRecord]],
    live_scored: dict[str, list[ScoredWait]],
    env: dict[str, Any],
    replicas: int,
) -> dict[str, Any]:
    print(
        f"# bench-agree: {spec.requests} requests at {spec.rate_rps:g}/s, seed {args.seed}, "
        f"classes {args.classes}; {replicas} replicas x {args.max_num_seqs} seats, "
        f"max_num_batched_tokens {args.max_num_batched_tokens}, profile {args.profile}"
    )
    both = live if live else {p: [] for p in sim}
    rows = side_by_side(live, sim) if live else []
    result: dict[str, Any] = {
        "args": {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"
        },
        "replicas": replicas,
        "environment": env,
        "rows": [],
    }
    print("| policy | class | requests | live att. % | sim att. % | live - sim (points) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    if rows:
        for r in rows:
            print(
                f"| {r.policy} | {r.class_name} | {r.requests} | {r.live_pct:.1f} | "
                f"{r.sim_pct:.1f} | {r.diff_points:+.1f} |"
            )
            result["rows"].append({**asdict(r), "diff_points": r.diff_points})
    else:
        from slomesh.bench.agree.compare import attainment

        for p in both:
            for cls, (n, pct) in sorted(attainment(sim[p]).items(), key=lambda kv: kv[0] != ALL):
                print(f"| {p} | {cls} | {n} | - | {pct:.1f} | - |")
                result["rows"].append(
                    {"policy": p, "class_name": cls, "requests": n, "sim_pct": pct}
                )
    sim_all = {p: next(x for x in result["rows"] if x["policy"] == p)["sim_pct"] for p in sim}
    result["sim_ranking"] = ranking(sim_all)
    result["sim_spread_points"] = max_spread(sim_all)
    print(f"sim ranking: {' > '.join(ranking(sim_all))} (spread {max_spread(sim_all):.1f} points)")
    if rows:
        live_all = {r.policy: r.live_pct for r in rows if r.class_name == ALL}
        worst = max(abs(r.diff_points) for r in rows if r.class_name == ALL)
        agree = rankings_agree(live_all, sim_all, args.tie_points)
        result |= {
            "live_ranking": ranking(live_all),
            "live_spread_points": max_spread(live_all),
            "ranking_agrees": agree,
            "max_abs_diff_points": worst,
        }
        print(
            f"live ranking: {' > '.join(ranking(live_all))} (spread "
            f"{max_spread(live_all):.1f}); ranking agrees (ties within {args.tie_points:g} "
            f"points): {agree}; largest |live - sim| per policy: {worst:.1f} points"
        )
    print(f"RWT estimator, requests queued behind >= {args.min_groups} groups:")
    print("| side | policy | pairs | R² point | coverage quantile | coverage widened | MAE s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    result["rwt"] = []
    for side, scored in (("live", live_scored), ("sim", sim_scored)):
        for p, waits in scored.items():
            if not waits:
                continue
            s = rwt_score(waits, args.min_groups)
            every = rwt_score(waits, 0)
            result["rwt"].append(
                {"side": side, "policy": p, "min_groups": args.min_groups, **asdict(s)}
                | {"all_pairs": every.pairs, "all_r2_point": every.r2_point}
            )
            print(
                f"| {side} | {p} | {s.pairs} | {_num(s.r2_point)} | {_num(s.coverage_quantile)} "
                f"| {_num(s.coverage_widened)} | {_num(s.mean_abs_error_s, 2)} |"
            )
    return result
