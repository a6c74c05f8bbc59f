"""`slomesh bench --capacity`: capacity at SLO per stack (see slomesh/bench/capacity*.py)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from shared.report.capacity import CapacityRow, format_capacity_table, write_capacity
from slomesh.bench.capacity import CapacitySettings
from slomesh.bench.capacity_page import update_page
from slomesh.bench.capacity_run import probe_min_duration_s, probe_requests, run_capacity
from slomesh.bench.scenarios import ScenarioSpec
from slomesh.cli.errors import UsageError, describe
from slomesh.stacks import load_stack


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--capacity",
        action="store_true",
        help="find each stack's highest rate with SLO attainment >= --target (bisection, "
        "median over --seeds); --rate is the starting rate, --requests the requests per probe",
    )
    p.add_argument("--target", type=float, default=0.9, help="capacity target in (0, 1]")
    p.add_argument("--seeds", help="comma-separated capacity seeds (default 0,1,2)")
    p.add_argument("--bracket", help="LO,HI r/s: a capacity bracket instead of searching one")
    p.add_argument(
        "--page",
        type=Path,
        help="also store this scenario's table in a generated results page (e.g. "
        "docs/results/capacity.md; its data in the same path with .json) and render it again",
    )
    p.add_argument(
        "--overall-only",
        action="store_true",
        help="search only the overall capacity, not the every-class one (fewer probes)",
    )


def _ints(flag: str, text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise UsageError(f"{flag} must be comma-separated integers: {e}") from e


def settings_from_args(args: argparse.Namespace) -> CapacitySettings:
    """CapacitySettings from the command line; bad values are a UsageError naming the flag."""
    fields: dict[str, object] = {"target": args.target, "every_class": not args.overall_only}
    if args.seeds is not None:
        fields["seeds"] = _ints("--seeds", args.seeds)
    if args.bracket is not None:
        try:
            lo, hi = (float(x) for x in args.bracket.split(","))
        except ValueError as e:
            raise UsageError(f"--bracket must be LO,HI (two numbers), got '{args.bracket}'") from e
        fields["bracket"] = (lo, hi)
    if args.requests is not None:
        fields["probe_requests"] = args.requests
    try:
        return CapacitySettings.model_validate(fields)
    except ValidationError as e:
        raise UsageError(f"--capacity settings: {describe(e)}") from e


def _at_least(duration_s: float | None) -> str:
    return "" if duration_s is None else f" (or more: at least {duration_s:g} s of arrivals)"


def run_capacity_cli(
    args: argparse.Namespace, sc: ScenarioSpec, stacks: list[str], out_dir: Path
) -> int:
    if args.sweep_rates is not None:
        raise UsageError("--capacity and --sweep-rates do not go together")
    settings = settings_from_args(args)
    start = args.rate or sc.default_rate_rps
    t0 = time.perf_counter()
    found = run_capacity(sc, stacks, settings, start)
    wall = time.perf_counter() - t0
    rows = [
        CapacityRow(
            load_stack(p.stack).name,  # a stack file's own name, not its path
            p.capacity_rps,
            {s: r.capacity_rps for s, r in p.by_seed.items()},
            p.to_dict(),
            frozenset(s for s, r in p.by_seed.items() if r.hi_rps is None),
            every_class_rps=p.every_class_rps,
            every_class_unbounded=any(r.hi_rps is None for r in p.every_class_by_seed.values()),
        )
        for p in found
    ]
    n = probe_requests(sc, settings)
    duration_s = probe_min_duration_s(sc)
    extra = {
        "probe_min_duration_s": duration_s,
        "target": settings.target,
        "rel_tol": settings.rel_tol,
        "start_rate_rps": start,
        "instances": sc.cluster.num_instances,
        "wall_s": round(wall, 1),
    }
    write_capacity(out_dir, sc.name, settings.seeds, n, rows, settings.target, extra)
    if args.page is not None:
        command = shlex.join(["slomesh", *sys.argv[1:]])
        update_page(
            args.page,
            sc.name,
            sc.description,
            command,
            settings.seeds,
            n,
            settings.target,
            rows,
            duration_s,
        )
    print(f"# {sc.name}: {sc.description}")
    print(
        f"# capacity at >= {100 * settings.target:g}% SLO attainment, start {start:g} req/s, "
        f"{n} requests per probe{_at_least(duration_s)}, "
        f"seeds {','.join(map(str, settings.seeds))}, {wall:.0f} s"
    )
    print(format_capacity_table(rows, settings.target))
    print(f"wrote {out_dir}/")
    return 0
