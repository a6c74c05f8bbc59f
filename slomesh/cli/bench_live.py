"""`slomesh bench-live`: the same Locust load against the live mesh under each serving stack.

For each stack: start the mesh on an embedded Ray (`slomesh up --stack P`: the scheduler runs P
and the replicas' engine queues follow P's stack), run loadtest/locustfile.py headless for a fixed
time with a fixed SLO-class mix and per-class output lengths, stop the mesh, and keep Locust's
per-class report (requests, SLO and TTFT attainment, TTFT p50/p99, rejections). Prints one table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from slomesh.cli.errors import UsageError
from slomesh.launch import mesh
from slomesh.stacks import load_stack
from slomesh.stacks.live import apply_stack

_LOCUSTFILE = Path(__file__).resolve().parents[2] / "loadtest" / "locustfile.py"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench-live", help="Locust load on the live mesh, once per stack")
    p.add_argument("--engine", choices=sorted(mesh.CONFIGS), default="vllm")
    p.add_argument(
        "--stacks",
        default="vllm-fcfs,slomesh",
        help="comma-separated stacks (names or stack files)",
    )
    p.add_argument("--users", type=int, default=48, help="Locust users (closed loop)")
    p.add_argument("--spawn-rate", type=float, default=16.0, help="users started per second")
    p.add_argument("--seconds", type=int, default=90, help="load duration per stack")
    p.add_argument("--slo-mix", default="tight:0.3,batch-2:0.7", help="class:weight,...")
    p.add_argument("--class-max-tokens", default="tight:8,batch-2:192", help="class:max_tokens,...")
    p.add_argument(
        "--max-num-seqs",
        type=int,
        help="running requests per replica engine (and the scheduler's view of it); fewer seats "
        "make requests queue at a load this machine can carry",
    )
    p.add_argument("--out", type=Path, default=Path("runs/bench-live.json"))
    p.set_defaults(func=run)


def _with_seats(config: dict[str, Any], seats: int) -> dict[str, Any]:
    for app in config["applications"]:
        args = app.setdefault("args", {})
        if app["name"] == "scheduler":
            args["max_num_seqs_per_replica"] = seats
        elif app["name"].startswith("replica-"):
            if args.get("engine") == "vllm":
                args.setdefault("vllm", {})["max_num_seqs"] = seats
            else:
                args.setdefault("engine_config", {})["max_num_seqs"] = seats
    return config


def _trusting_anonymous(config: dict[str, Any]) -> dict[str, Any]:
    """The load generator sends no API key: let anonymous traffic ask for any class (the
    default anonymous entitlement refuses the tightest, which the default mix uses)."""
    for app in config["applications"]:
        if app["name"] == "ingress":
            tenancy = app.setdefault("args", {}).setdefault("tenancy", {})
            tenancy["anonymous"] = {"max_criticality": 1, "min_ttft_ms": None, "min_tpot_ms": None}
    return config


def _served_model(config: dict[str, Any]) -> str:
    ingress = next(a for a in config["applications"] if a["name"] == "ingress")
    name: str = ingress["args"]["models"][0]["name"]
    return name


def _locust(args: argparse.Namespace, http: str, model: str, out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(_LOCUSTFILE),
        "--headless",
        "--only-summary",
        "-u",
        str(args.users),
        "-r",
        str(args.spawn_rate),
        "-t",
        f"{args.seconds}s",
        "--stop-timeout",
        "30",
        "--host",
        http.removesuffix("/v1"),
        "--slo-mix",
        args.slo_mix,
        "--class-max-tokens",
        args.class_max_tokens,
        "--model",
        model,
    ]
    env = os.environ | {"SLOMESH_LOCUST_OUT": str(out)}
    proc = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
    if not out.exists():
        raise RuntimeError(f"locust wrote no report ({' '.join(cmd)}):\n{proc.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def run(args: argparse.Namespace) -> int:
    stacks = [p.strip() for p in args.stacks.split(",") if p.strip()]
    base = _trusting_anonymous(mesh.load_config(mesh.CONFIGS[args.engine]))
    if args.max_num_seqs is not None:
        if args.max_num_seqs < 1:
            raise UsageError(f"--max-num-seqs must be >= 1, got {args.max_num_seqs}")
        base = _with_seats(base, args.max_num_seqs)
    if args.engine in mesh.DEFAULT_PROFILES:  # the measured CPU profile, as `slomesh up` uses
        base = mesh.with_profiles(base, [mesh.DEFAULT_PROFILES[args.engine]])
    configs = {}
    for stack in stacks:
        try:
            configs[stack] = apply_stack(base, load_stack(stack))
        except ValueError as err:
            raise UsageError(f"--stacks: {err}") from None
    if args.engine == "vllm":
        from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

        build_tiny_model(default_tiny_model_dir())
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for stack, config in configs.items():
            try:
                mesh.start(config)
                http, _ = mesh.endpoints(config)
                out = Path(tmp) / f"{stack}.json"
                results[stack] = _locust(args, http, _served_model(config), out)
            finally:
                mesh.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": _args(args), "results": results}, indent=2))
    print(f"# bench-live: {args.engine}, {args.users} users, {args.seconds}s, mix {args.slo_mix}")
    print(
        "| stack | class | requests | rejected | SLO att. % | TTFT att. % | TTFT p50/p99 s "
        "| TPOT p50/p99 ms | TPOT met (served) % |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for stack, report in results.items():
        for cls, row in report.items():
            print(
                f"| {stack} | {cls} | {row['requests']} | {row['rejected']} | "
                f"{100 * row['slo_attainment']:.1f} | {100 * row['ttft_attainment']:.1f} | "
                f"{_pair(row, 'ttft', 1.0, 3)} | {_pair(row, 'tpot', 1e3, 1)} | "
                f"{_pct(row.get('tpot_attainment_served'))} |"
            )
    print(f"wrote {args.out}")
    return 0


def _pair(row: dict[str, Any], metric: str, scale: float, digits: int) -> str:
    p50, p99 = row.get(f"{metric}_p50_s"), row.get(f"{metric}_p99_s")
    if p50 is None or p99 is None:
        return "-"
    return f"{p50 * scale:.{digits}f} / {p99 * scale:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _args(args: argparse.Namespace) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "func"}
