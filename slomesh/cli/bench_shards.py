"""`slomesh bench-shards`: scheduler shards live and simulated (docs/results/shards.md).

1. `--live` (optional; needs the ports of `slomesh up`): the admission ladder of the zero-time
   mesh with each of `--live-shards` scheduler shards, and the scheduler tier's CPU per
   admission and while idle (slomesh/bench/shards_live.py).
2. The simulator with the measured costs (from this run's live part, else from the `--out`
   file's, else the `--*-cost-ms` flags): control-plane capacity with each of `--shards`
   shards, and fairness (Jain's index on tenants-skew, doubled) with 1 and 2 shards
   (slomesh/bench/shards.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from slomesh.sim.shards import ShardModel

RESULTS = Path("docs/results/shards.json")
PAGE = Path("docs/results/shards.md")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench-shards", help="scheduler shards: live ladder, simulated scaling")
    p.add_argument("--live", action="store_true", help="also run the live admission ladder")
    p.add_argument("--live-shards", default="1,2", help="shard counts of the live ladder")
    p.add_argument(
        "--live-only",
        action="store_true",
        help="with --live: record the ladder in --out and stop (run the simulator later, "
        "outside the live lock: its costs are read from --out)",
    )
    p.add_argument("--rates", default="80,160,240,320", help="live ladder rates, requests/s")
    p.add_argument("--seconds", type=float, default=8.0, help="seconds per live rate")
    p.add_argument("--shards", default="1,2,4", help="shard counts of the simulated capacity")
    p.add_argument("--admit-cost-ms", type=float, default=None, help="CPU per admission, ms")
    p.add_argument("--exchange-cost-ms", type=float, default=None, help="CPU per exchange, ms")
    p.add_argument("--seeds", default="0,1,2", help="fairness seeds")
    p.add_argument("--fairness-requests", type=int, default=3000)
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--page", type=Path, default=PAGE)
    p.set_defaults(func=run)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def measured_costs(live: list[dict[str, Any]]) -> tuple[float, float]:
    """(CPU per admission, CPU per exchange with one peer) in ms from the live ladders: the
    median per-admission cost of the error-free steps of the one-shard mesh, and the extra
    idle CPU a shard of the largest split spends over the lone scheduler, per exchange
    interval and peer."""
    by = {r["shards"]: r for r in live}
    one = by[min(by)]
    costs = [s["scheduler_cpu_per_admission_ms"] for s in one["steps"] if s["errors"] == 0]
    admit = statistics.median(costs or [s["scheduler_cpu_per_admission_ms"] for s in one["steps"]])
    k = max(by)
    exchange = 0.0
    if k > 1:
        extra_per_s = by[k]["idle_scheduler_cpu_per_s"] / k - one["idle_scheduler_cpu_per_s"]
        interval_s = ShardModel().exchange_interval_ms / 1e3
        exchange = max(extra_per_s, 0.0) * interval_s / (k - 1) * 1e3
    return admit, exchange


def run(args: argparse.Namespace) -> int:
    from slomesh.bench import shards as bench

    old = json.loads(args.out.read_text()) if args.out.exists() else {}
    result: dict[str, Any] = {"live": old.get("live", [])}
    if args.live:
        result["live"] = _live(args)
        if args.live_only:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({**old, "live": result["live"]}, indent=1))
            print(f"wrote the live ladder to {args.out}")
            return 0
    admit, exchange = measured_costs(result["live"]) if result["live"] else (2.0, 0.0)
    source = "the live ladder" if result["live"] else "defaults"
    if args.admit_cost_ms is not None or args.exchange_cost_ms is not None:
        source = "given with --admit-cost-ms / --exchange-cost-ms"
    admit = args.admit_cost_ms if args.admit_cost_ms is not None else admit
    exchange = args.exchange_cost_ms if args.exchange_cost_ms is not None else exchange
    result["command"] = " ".join(["slomesh", *sys.argv[1:]])
    result["costs"] = {"admit_cost_ms": admit, "exchange_cost_ms": exchange, "source": source}
    result["capacity"] = []
    for k in _ints(args.shards):
        model = ShardModel(shards=k, admit_cost_ms=admit, exchange_cost_ms=exchange)
        found = bench.capacity(model)
        result["capacity"].append(
            {"shards": k, "capacity_rps": found.capacity_rps, "probes": found.probes}
        )
        print(f"simulated capacity, {k} shard(s): {found.capacity_rps:.0f} req/s", flush=True)
    result["fairness"] = []
    for k in (1, 2):
        model = ShardModel(shards=k, admit_cost_ms=admit, exchange_cost_ms=exchange)
        fair = bench.fairness(model, _ints(args.seeds), args.fairness_requests)
        result["fairness"].append(fair)
        print(f"tenants-skew, {k} shard(s): Jain {fair['jain_median']:.3f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    from slomesh.bench.shards_page import render

    args.page.write_text(render(result))
    print(f"wrote {args.out} and {args.page}")
    return 0


def _live(args: argparse.Namespace) -> list[dict[str, Any]]:
    from slomesh.bench.shards_live import run_ladder
    from slomesh.cli.bench_mesh import _api_url, _zero_time_config

    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    out = []
    for k in _ints(args.live_shards):
        config = _zero_time_config("handle")
        url = f"{_api_url(config, 'front')}/completions"
        out.append(run_ladder(config, k, url, rates, args.seconds, 0))
    return out
