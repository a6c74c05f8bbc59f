"""`slomesh bench-mesh --compare bare-vllm,ray-serve-llm`: the side-by-side run (see
slomesh/bench/compare/run.py) and its outputs: the table, the span breakdown of slomesh's
traces, DIR/compare.json and DIR/compare-detail.json (every figure)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from slomesh.bench.compare import hot_path
from slomesh.bench.compare.admission_paths import describe
from slomesh.bench.compare.run import Plan, load_average, parse_systems, run_system, specs
from slomesh.bench.compare.stats import (
    SystemResult,
    compare_json,
    format_spans,
    format_table,
    span_breakdown,
)

PORTS = {"bare-vllm": 8001, "ray-serve-llm": 8002}
"""Where the peers listen (slomesh: its config's 8000)."""


def run_compare(args: argparse.Namespace, admission_capacity: Callable[[], float | None]) -> int:
    names = parse_systems(args.compare)
    out_dir: Path = args.out if args.out is not None else Path("runs/compare")
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = Plan(c8_seconds=args.c8_seconds)
    sitting = {
        "commit": _commit(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_before": load_average(),
        "command": "slomesh " + shlex.join(sys.argv[1:]),
    }
    print(f"load average before: {sitting['load_before']}")
    results: list[SystemResult] = []
    span_tables: dict[str, dict[str, dict[str, float]]] = {}
    admissions: dict[str, dict[str, Any]] = {}
    for spec in specs(names, out_dir, PORTS):
        result, windows = run_system(spec, plan, out_dir / "logs")
        print(f"   load average: {load_average()}")
        if spec.name in ("slomesh", "slomesh-proxy"):
            traces = out_dir / f"traces-{spec.name}.jsonl"
            lines = traces.read_text().splitlines() if traces.exists() else []
            label = "" if spec.name == "slomesh" else f" ({spec.name})"
            for phase, window in windows.items():
                span_tables[phase + label] = span_breakdown(lines, window)
            for phase, counted in result.admissions.items():
                admissions[phase + label] = counted
            result.spans = span_tables.get("unloaded max_tokens=1" + label, {})
        results.append(result)
    capacity = admission_capacity() if args.rates.strip() else None
    print(f"load average after: {load_average()}")
    print()
    print(format_table(results))
    for phase, table in span_tables.items():
        print(f"\nslomesh spans, {phase}:")
        print(format_spans(table))
    for phase, paths in admissions.items():
        print(f"\nslomesh admissions, {phase}: {describe(paths)}")
    for r in results:
        if r.cpu_by_process_s:
            top = list(r.cpu_by_process_s.items())[:8]
            print(f"\n{r.name}: CPU s over the c8 run by process: ", end="")
            print(", ".join(f"{k} {v:.1f}" for k, v in top))
    print(f"\nadmission capacity (simulated engines, p99 <= 50 ms): {capacity}")
    (out_dir / "compare.json").write_text(json.dumps(compare_json(results, capacity), indent=2))
    detail = {
        "systems": [asdict(r) for r in results],
        "spans": span_tables,
        "admissions": admissions,
        "plan": asdict(plan),
        "load_average_end": load_average(),
        "sitting": sitting,
        "admission_capacity_rps": capacity,
    }
    (out_dir / "compare-detail.json").write_text(json.dumps(detail, indent=2))
    print(f"wrote {out_dir / 'compare.json'} and {out_dir / 'compare-detail.json'}")
    if args.page is not None:
        write_page(args.page, detail, args.baseline)
    return 0


def write_page(page: Path, detail: dict[str, Any], baseline_dir: Path | None) -> None:
    """The hot-path page (slomesh/bench/compare/hot_path.py) of this sitting's figures."""
    baseline = None
    if baseline_dir is not None:
        baseline = json.loads((baseline_dir / "compare-detail.json").read_text())
    command = "slomesh " + shlex.join(sys.argv[1:])
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(hot_path.render(detail, command, baseline))
    print(f"wrote {page}")


def _commit() -> str:
    """The checkout's commit (short); a copy outside git names its own in SLOMESH_BENCH_COMMIT
    (else "?")."""
    named = os.environ.get("SLOMESH_BENCH_COMMIT")
    if named:
        return named
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip() or "?"
