"""`slomesh bench`: run serving stacks over a scenario in the simulator and write the comparison."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from shared.metrics.summary import StackSummary, summarize
from shared.policy import UnknownNameError
from shared.report.plots import plot_summaries, plot_sweep
from shared.report.table import format_table
from shared.report.writers import format_sweep_tables, write_summary, write_sweep
from shared.workloads import generate
from slomesh.bench.experiments import EXPERIMENTS, ExperimentArgs
from slomesh.bench.scenarios import SCENARIOS, ScenarioSpec
from slomesh.cli.bench_capacity import add_arguments as add_capacity_arguments
from slomesh.cli.bench_capacity import run_capacity_cli
from slomesh.cli.errors import UsageError
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench", help="compare serving stacks on a simulated scenario")
    p.add_argument(
        "--scenario",
        required=True,
        help=f"a scenario ({', '.join(SCENARIOS.names())}) or a QLM paper experiment "
        f"({', '.join(EXPERIMENTS.names())}: writes results.json, summary.md and figures)",
    )
    p.add_argument(
        "--stacks",
        help="comma-separated serving stacks, each a shipped stack name (slomesh/stacks/library) "
        "or a stack file path (default: the scenario's)",
    )
    p.add_argument("--rate", type=float, help="total arrival rate, requests/s")
    p.add_argument("--requests", type=int, help="number of requests")
    p.add_argument("--instances", type=int, help="number of serving instances")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--out", type=Path, help="output folder (default runs/<scenario>)")
    p.add_argument("--sweep-rates", help="comma-separated rates: plot attainment vs rate")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_capacity_arguments(p)
    p.set_defaults(func=run)


def _check_name(name: str) -> None:
    if name not in SCENARIOS.names() and name not in EXPERIMENTS.names():
        valid = sorted([*SCENARIOS.names(), *EXPERIMENTS.names()])
        raise UnknownNameError("scenario or experiment", name, valid)


_NOT_FOR_EXPERIMENTS = ("stacks", "rate", "instances", "sweep_rates", "seeds", "bracket", "page")


def _run_experiment(args: argparse.Namespace) -> int:
    given = [
        f"--{a.replace('_', '-')}" for a in _NOT_FOR_EXPERIMENTS if getattr(args, a) is not None
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)} do not apply to experiment '{args.scenario}' "
            "(only --requests, --seed, --out, --no-progress)"
        )
    exp_args = ExperimentArgs(
        out_dir=args.out,
        seed=args.seed,
        requests=args.requests,
        progress=not args.no_progress,
    )
    EXPERIMENTS.create(args.scenario).run(exp_args)
    return 0


def _scenario(args: argparse.Namespace) -> ScenarioSpec:
    SCENARIOS.check(args.scenario)
    sc = SCENARIOS.create(args.scenario)
    updates: dict[str, object] = {}
    if args.requests is not None:
        if args.requests < 1:
            raise UsageError(f"--requests must be >= 1, got {args.requests}")
        updates["workload"] = sc.workload.model_copy(update={"requests": args.requests})
    if args.instances is not None:
        if args.instances < 1:
            raise UsageError(f"--instances must be >= 1, got {args.instances}")
        updates["cluster"] = sc.cluster.with_instances(args.instances)
    sc = sc.model_copy(update=updates)
    if args.rate is not None:
        sc = sc.model_copy(update={"workload": _at_rate(sc, args.rate).workload})
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    return sc


def _at_rate(sc: ScenarioSpec, rate: float) -> ScenarioSpec:
    if not rate > 0:
        raise UsageError(f"--rate must be > 0 requests/s, got {rate}")
    return sc.model_copy(update={"workload": sc.workload.with_total_rate(rate)})


def _stacks(args: argparse.Namespace, sc: ScenarioSpec) -> list[str]:
    names = args.stacks.split(",") if args.stacks else sc.default_stacks
    names = [n.strip() for n in names if n.strip()]
    for n in names:
        try:
            STACKS.check(n)
        except ValueError as err:
            raise UsageError(f"--stacks: {err}") from None
    return names


def _run_all(
    sc: ScenarioSpec, stacks: list[str], seed: int, tick: Callable[[int], None]
) -> list[StackSummary]:
    requests = generate(sc.workload, seed)
    out = []
    for name in stacks:
        result = Simulator(sc.cluster, STACKS.create(name), requests, progress=tick).run()
        out.append(summarize(result))
    return out


def run(args: argparse.Namespace) -> int:
    _check_name(args.scenario)
    if args.scenario in EXPERIMENTS.names():
        if args.capacity:
            raise UsageError(f"--capacity does not apply to experiment '{args.scenario}'")
        return _run_experiment(args)
    sc = _scenario(args)
    stacks = _stacks(args, sc)
    out_dir: Path = args.out or Path("runs") / sc.name
    if args.capacity:
        return run_capacity_cli(args, sc, stacks, out_dir)
    rates = _parse_rates(args.sweep_rates) if args.sweep_rates else None
    total = sc.workload.requests * len(stacks) * (len(rates) if rates else 1)
    quiet = args.no_progress or not sys.stderr.isatty()
    with tqdm(total=total, disable=quiet, unit="req", desc=sc.name) as bar:
        if rates is None:
            summaries = _run_all(sc, stacks, args.seed, bar.update)
            extra = {"rate_rps": sc.default_rate_rps, "instances": sc.cluster.num_instances}
            write_summary(out_dir, sc.name, args.seed, sc.workload.requests, summaries, extra)
            plot_summaries(out_dir, summaries)
            report = format_table(summaries)
        else:
            sweep: dict[str, list[tuple[float, StackSummary]]] = {p: [] for p in stacks}
            for rate in rates:
                for s in _run_all(_at_rate(sc, rate), stacks, args.seed, bar.update):
                    sweep[s.stack].append((rate, s))
            write_sweep(out_dir, sc.name, args.seed, sc.workload.requests, sweep)
            plot_sweep(out_dir, sweep)
            report = format_sweep_tables(sweep)
    print(f"# {sc.name}: {sc.description}")
    print(
        f"# rate {sc.default_rate_rps:g} req/s, {sc.workload.requests} requests, "
        f"{sc.cluster.num_instances} instances, seed {args.seed}"
    )
    print(report)
    print(f"wrote {out_dir}/")
    return 0


def _parse_rates(text: str) -> list[float]:
    try:
        rates = [float(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise UsageError(f"--sweep-rates must be comma-separated numbers: {e}") from e
    if not rates or any(not r > 0 for r in rates):
        raise UsageError(f"--sweep-rates must be numbers > 0 requests/s, got '{text}'")
    return rates
