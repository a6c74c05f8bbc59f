"""`slomesh bench-solver`: time the QLM global scheduler on seeded random problems.

Issue target: <= 100 ms per solve for 64 groups x 8 queues, and <= 1 ms per queued request
amortized (e.g. 100,000 queued requests). Prints, per group count: median / p95 / max wall time of
`GlobalScheduler.plan`, the statuses, and the plan's objective against the heuristic's.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from services.scheduler.core.qlm.solvers.config import GlobalSchedulerConfig
from services.scheduler.core.qlm.solvers.global_scheduler import GlobalScheduler
from services.scheduler.core.qlm.solvers.heuristic import heuristic_plan
from slomesh.bench.solver_problems import random_problem
from slomesh.cli.errors import UsageError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench-solver", help="time the QLM global scheduler on random problems")
    p.add_argument("--groups", default="16,64", help="comma-separated group counts (default 16,64)")
    p.add_argument("--queues", type=int, default=8, help="virtual queues (default 8)")
    p.add_argument("--models", type=int, default=4, help="distinct models (default 4)")
    p.add_argument("--repeats", type=int, default=10, help="problems per group count (default 10)")
    p.add_argument("--seed", type=int, default=0, help="problem seed (default 0)")
    p.add_argument(
        "--queued-requests",
        type=int,
        help="requests queued in all, split over the groups (default: 1-100 per group)",
    )
    p.add_argument("--solver", default="ilp", help="ilp or heuristic (default ilp)")
    p.add_argument("--time-limit", type=float, help="ILP time limit, seconds (default: config's)")
    p.add_argument("--window", type=int, help="ILP window, groups (default: config's)")
    p.set_defaults(func=run)


def _ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise UsageError(f"{what} must be comma-separated integers: {e}") from e
    if not vals or any(v < 1 for v in vals):
        raise UsageError(f"{what} must be integers >= 1, got '{text}'")
    return vals


def _config(args: argparse.Namespace) -> GlobalSchedulerConfig:
    if args.solver not in ("ilp", "heuristic"):
        raise UsageError(f"--solver must be ilp or heuristic, got '{args.solver}'")
    update: dict[str, object] = {"solver": args.solver}
    if args.time_limit is not None:
        update["time_limit_s"] = args.time_limit
    if args.window is not None:
        update["max_ilp_groups"] = args.window
    return GlobalSchedulerConfig.model_validate(update)


def run(args: argparse.Namespace) -> int:
    sizes = _ints(args.groups, "--groups")
    for flag, val in (("--queues", args.queues), ("--models", args.models)):
        if val < 1:
            raise UsageError(f"{flag} must be >= 1, got {val}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.queued_requests is not None and args.queued_requests < max(sizes):
        raise UsageError(f"--queued-requests must be >= the largest group count {max(sizes)}")
    cfg = _config(args)
    rng = np.random.default_rng(args.seed)
    print(
        f"# bench-solver: {args.queues} queues, {args.models} models, {args.repeats} repeats, "
        f"seed {args.seed}; solver {cfg.solver}, time limit {cfg.time_limit_s:g} s, "
        f"gap {cfg.mip_rel_gap:g}, window {cfg.max_ilp_groups} groups"
    )
    print(
        f"{'groups':>7} {'requests':>9} {'median_ms':>10} {'p95_ms':>8} {'max_ms':>8} "
        f"{'ms/request':>11}  {'vs heuristic':>13}  statuses"
    )
    for n in sizes:
        print(_row(n, args, cfg, rng))
    return 0


def _row(
    n: int, args: argparse.Namespace, cfg: GlobalSchedulerConfig, rng: np.random.Generator
) -> str:
    sched = GlobalScheduler(cfg)
    times, gains, requests = [], [], []
    statuses: Counter[str] = Counter()
    for _ in range(args.repeats):
        gs, qs = random_problem(rng, n, args.queues, args.models, args.queued_requests)
        plan = sched.plan(gs, qs)
        heur = heuristic_plan(gs, qs)
        times.append(plan.solve_s * 1e3)
        statuses[plan.status] += 1
        gains.append(1.0 - plan.objective / heur.objective if heur.objective > 0 else 0.0)
        requests.append(sum(g.size for g in gs))
    t = np.array(times)
    per_req = float(np.median(t)) / float(np.mean(requests))
    better = sum(x > 1e-9 for x in gains)
    vs = f"-{100 * float(np.mean(gains)):.1f}% ({better}/{len(gains)})"
    return (
        f"{n:>7} {int(np.mean(requests)):>9} {np.median(t):>10.1f} {np.percentile(t, 95):>8.1f} "
        f"{t.max():>8.1f} {per_req:>11.5f}  {vs:>13}  {_fmt(statuses)}"
    )


def _fmt(c: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


__all__ = ["add_parser", "random_problem", "run"]
