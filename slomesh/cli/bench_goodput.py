"""`slomesh bench-goodput`: goodput of bare vLLM and slomesh measured by vLLM's own benchmark.

See `slomesh.bench.goodput.run` for what is measured; the page and plot are rendered by
`slomesh.bench.goodput.page`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from slomesh.bench.compare.stats import SYSTEM_NAMES
from slomesh.cli.errors import UsageError

SYSTEMS = SYSTEM_NAMES
"""The systems bench-goodput starts by name: those bench-mesh --compare knows."""
PORTS = {"bare-vllm": 8001, "ray-serve-llm": 8002}
"""Where the peers listen (slomesh: its config's front door, 8100)."""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench-goodput",
        help="goodput of bare vLLM and slomesh with vLLM's own serving benchmark",
    )
    p.add_argument(
        "--systems",
        default="bare-vllm,slomesh",
        help=f"systems to start one after another, in this order: any of {','.join(SYSTEMS)} "
        "(slomesh: the shipped config's replicas, one, through the front door; slomesh-1: "
        "its first replica only; slomesh-no-priority: slomesh with its engines left at the "
        "mesh's CPU priority and unpinned, vllm.engine_nice and engine_cpus null); "
        "slomesh+A+B: slomesh with engine CPU variants A, B (nice-5, nice-15, nice-20: "
        "vllm.engine_nice; batch, idle: vllm.mesh_sched_policy; pin: vllm.engine_cpus, the "
        "highest CPU; nopin: engine_cpus null; helpers-any, helpers-rest, helpers-engine: "
        "vllm.engine_helpers; rt, nort: vllm.engine_realtime; nostats, stats: "
        "vllm.engine_stats false, true)",
    )
    p.add_argument(
        "--url",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="also measure a system already running at an OpenAI base URL "
        "(http://host:port/v1), e.g. one `bench-mesh --compare`'s launcher started",
    )
    p.add_argument("--rates", default="10,20,30,60", help="offered loads, requests/s")
    p.add_argument("--seconds", type=float, default=20.0, help="arrivals per rate, seconds")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens per request")
    p.add_argument("--output-len", type=int, default=256, help="output tokens per request")
    p.add_argument("--slo-ttft-ms", type=float, default=1000.0, help="TTFT objective, ms")
    p.add_argument("--slo-tpot-ms", type=float, default=50.0, help="TPOT objective, ms")
    p.add_argument(
        "--no-slo-headers",
        action="store_true",
        help="do not send x-slo-ttft-ms / x-slo-tpot-ms (slomesh uses its default class; "
        "vLLM's --goodput still judges by the objectives above)",
    )
    p.add_argument("--warmups", type=int, default=4, help="warm-up requests per system")
    p.add_argument("--seed", type=int, default=0, help="seed of vLLM's random dataset")
    p.add_argument(
        "--out", type=Path, default=Path("runs/goodput"), help="folder for goodput.json and logs"
    )
    p.add_argument(
        "--page",
        type=Path,
        default=None,
        help="also write the results page here (e.g. docs/results/goodput.md), its data file "
        "(.json) and goodput.png next to it",
    )
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a goodput.json of an earlier sitting (e.g. before a change) to show on the page "
        "as the 'before' table",
    )
    p.add_argument(
        "--render",
        type=Path,
        default=None,
        help="measure nothing: render --page (default: this file with .md) from this JSON",
    )
    p.add_argument(
        "--sim-calibrated-on",
        type=Path,
        default=None,
        metavar="DIR",
        help="also simulate this sitting's ladder with the profile calibrated on an earlier "
        "sitting (that run's --out folder: goodput.json and vllm-results/): the simulator "
        "against live across sittings",
    )
    p.add_argument(
        "--reanalyse",
        action="store_true",
        help="with --render: first compute the confusion matrix and the simulated ladder again "
        "from the vLLM result files next to the JSON (<its folder>/vllm-results)",
    )
    p.add_argument(
        "--measure-only",
        action="store_true",
        help="skip the confusion matrix and the simulated ladder after measuring (they take "
        "CPU on the host); compute them later with --render <out>/goodput.json --reanalyse",
    )
    p.set_defaults(func=run)


def parse_systems(text: str) -> list[str]:
    from slomesh.bench.compare.run import variant_settings

    names = [n.strip() for n in text.split(",") if n.strip()]
    try:
        unknown = [n for n in names if n not in SYSTEMS and variant_settings(n) is None]
    except ValueError as err:
        raise UsageError(f"--systems: {err}") from None
    if unknown:
        raise UsageError(
            f"--systems: unknown system(s) {', '.join(unknown)}; valid: {', '.join(SYSTEMS)}"
        )
    return list(dict.fromkeys(names))


def parse_urls(items: list[str]) -> list[tuple[str, str]]:
    out = []
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not name.strip() or not url.startswith(("http://", "https://")):
            raise UsageError(f"--url: expected NAME=http://host:port/v1, got {item!r}")
        out.append((name.strip(), url.strip()))
    return out


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def _before(path: Path) -> dict[str, Any]:
    """The parts of an earlier run the page shows."""
    old = json.loads(path.read_text())
    keep = ("command", "date", "commit", "load_average_before", "load_average_after", "systems")
    return {k: old[k] for k in keep if k in old}


def analyse(
    runs: list[Any], plan: Any, out: Path, calibrate_in: Path | None = None
) -> dict[str, Any]:
    """The confusion matrix and the simulated ladder of every slomesh system (analysis.py);
    with `calibrate_in` (an earlier sitting's --out folder) the simulator's profile is
    calibrated on that sitting's ladder of the same system instead."""
    from dataclasses import asdict

    from services.ingress.args import IngressArgs
    from shared.profiles.io import load_profiles
    from slomesh.bench.goodput.analysis import analyse_system, read_offered
    from slomesh.bench.goodput.rejections import read_rejections
    from slomesh.bench.goodput.sitting import BASELINE, baseline_tpot, describe, host_scale
    from slomesh.launch import mesh

    profile = load_profiles(mesh.DEFAULT_PROFILES["vllm"])[0]
    config = mesh.load_config(mesh.CONFIGS["vllm"])
    replica = next(a for a in config["applications"] if a["name"].startswith("replica-"))
    seqs = int(replica["args"]["vllm"]["max_num_seqs"])
    ingress = IngressArgs.model_fields["num_replicas"].default
    found = {}
    scale, how = None, ""
    if calibrate_in is not None:
        then = json.loads((calibrate_in / "goodput.json").read_text())
        now = {s.rate_rps: s.tpot_p50_ms for r in runs if r.name == BASELINE for s in r.steps}
        then_tpot = baseline_tpot(then)
        scale = host_scale(now, then_tpot)
        how = describe(scale, sorted(now.keys() & then_tpot.keys()))
    for r in runs:
        if not r.name.startswith("slomesh") or not r.engines:
            continue
        earlier = None
        if calibrate_in is not None:
            earlier_plan = json.loads((calibrate_in / "goodput.json").read_text())["plan"]
            earlier = read_offered(earlier_plan, calibrate_in / "vllm-results" / r.name)
            if not earlier:
                continue
        got = analyse_system(
            r.engines, asdict(plan), out / "vllm-results" / r.name, profile, seqs, ingress,
            calibrate_on=earlier, host_scale=scale,
        )  # fmt: skip
        if got is not None and how:
            got["calibration"] += f"; {how}"
            got["host_scale"] = scale
        if got is not None and calibrate_in is None:
            traces = out / f"traces-{r.name}.jsonl"
            if traces.exists():
                got["rejections"] = read_rejections(
                    traces, out / "vllm-results" / r.name, plan.rates
                )
        if got is not None:
            found[r.name] = got
    return found


def check_calibration_sitting(earlier: Path) -> None:
    """UsageError when `earlier` (a --sim-calibrated-on folder) cannot calibrate a sitting."""
    from slomesh.bench.goodput.sitting import calibration_problem

    path = earlier / "goodput.json"
    if not path.exists():
        raise UsageError(f"--sim-calibrated-on: no {path}")
    problem = calibration_problem(json.loads(path.read_text()))
    if problem is not None:
        raise UsageError(f"--sim-calibrated-on {earlier}: {problem}")


def _across(runs: list[Any], plan: Any, out: Path, earlier: Path) -> dict[str, Any]:
    """This sitting's ladder simulated with the profile calibrated on the `earlier` one."""
    old = json.loads((earlier / "goodput.json").read_text())
    keep = ("command", "date", "commit", "load_average_before", "load_average_after")
    return {
        "sitting": {k: old[k] for k in keep if k in old},
        "analysis": analyse(runs, plan, out, earlier),
    }


def _render(args: argparse.Namespace) -> int:
    from slomesh.bench.goodput.page import write_page

    page = args.page or args.render.with_suffix(".md")
    if args.sim_calibrated_on is not None:
        check_calibration_sitting(args.sim_calibrated_on)
    data = json.loads(args.render.read_text())
    if args.reanalyse or args.sim_calibrated_on is not None:
        from slomesh.bench.goodput.results import step_of_json
        from slomesh.bench.goodput.run import Plan, SystemRun

        plan = Plan(**{**data["plan"], "rates": tuple(data["plan"]["rates"])})
        runs = [
            SystemRun(
                s["name"], s["engines"], s["base_url"], steps=[step_of_json(x) for x in s["steps"]]
            )
            for s in data["systems"]
        ]
        if args.reanalyse:
            data["analysis"] = analyse(runs, plan, args.render.parent)
        if args.sim_calibrated_on is not None:
            data["across"] = _across(runs, plan, args.render.parent, args.sim_calibrated_on)
        args.render.write_text(json.dumps(data, indent=2) + "\n")
    if args.before is not None:
        data["before"] = _before(args.before)
    for path in write_page(data, page):
        print(f"wrote {path}")
    return 0


def run(args: argparse.Namespace) -> int:
    from slomesh.bench.goodput.harness import parse_rates

    if args.render is not None:
        return _render(args)
    from slomesh.bench.compare.run import specs
    from slomesh.bench.goodput.page import analysis_lines, gap_lines, target_lines, write_page
    from slomesh.bench.goodput.results import format_table, step_json
    from slomesh.bench.goodput.run import Plan, run_system, run_url

    names = parse_systems(args.systems)
    urls = parse_urls(args.url)
    if args.sim_calibrated_on is not None:
        check_calibration_sitting(args.sim_calibrated_on)  # before an hour of measuring
    if not names and not urls:
        raise UsageError("nothing to measure: give --systems or --url")
    plan = Plan(
        rates=tuple(parse_rates(args.rates)),
        seconds=args.seconds,
        input_len=args.input_len,
        output_len=args.output_len,
        slo_ttft_ms=args.slo_ttft_ms,
        slo_tpot_ms=args.slo_tpot_ms,
        slo_headers=not args.no_slo_headers,
        warmups=args.warmups,
        seed=args.seed,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    from services.replica.vllm.tiny_model import default_tiny_model_dir

    tokenizer = str(default_tiny_model_dir())
    before = _load_average()
    print(f"load average before: {before}")
    runs = [run_system(spec, plan, tokenizer, out) for spec in specs(names, out, PORTS)]
    model = "tiny-llama"
    runs += [run_url(name, url, model, tokenizer, plan, out) for name, url in urls]
    data: dict[str, Any] = {
        "command": "slomesh " + shlex.join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "load_average_before": before,
        "load_average_after": _load_average(),
        "plan": asdict(plan),
        "systems": [
            {
                **{k: v for k, v in asdict(r).items() if k != "steps"},
                "steps": [step_json(s) for s in r.steps],
            }
            for r in runs
        ],
    }
    data["analysis"] = {} if args.measure_only else analyse(runs, plan, out)
    if args.sim_calibrated_on is not None and not args.measure_only:
        data["across"] = _across(runs, plan, out, args.sim_calibrated_on)
    if args.before is not None:
        data["before"] = _before(args.before)
    (out / "goodput.json").write_text(json.dumps(data, indent=2) + "\n")
    steps = [s for r in runs for s in r.steps]
    print()
    print(format_table(steps))
    print()
    for line in analysis_lines(data):
        print(line)
    for line in target_lines(steps):
        print(line)
    for line in gap_lines(data):
        print(line)
    for r in runs:
        if r.why_not:
            print(f"{r.name}: {r.why_not}")
    print(f"\nwrote {out / 'goodput.json'}")
    if args.page is not None:
        for path in write_page(data, args.page):
            print(f"wrote {path}")
    return 0
