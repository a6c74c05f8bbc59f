"""`slomesh bench-agree`'s arguments: the simulated side's view and seeds, the calibration rates
it parses and the command line that reproduces a run (the page lists it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from slomesh.cli.errors import UsageError


def add_sim_args(p: argparse.ArgumentParser) -> None:
    """The arguments of the simulated side: the policy's view, the seeds, stored live runs."""
    p.add_argument(
        "--policy-view",
        choices=("books", "engines"),
        default="books",
        help="what the simulated policy reads: the scheduler's books, each finish heard of "
        "after a report delay measured live (the scheduler's report log) and the TTFT guard's "
        "reports taken at the live Status interval, as the live policy reads them "
        "(slomesh/sim/live_view.py); engines: the simulated engines' exact state",
    )
    p.add_argument(
        "--sim-seeds",
        default="0",
        help="comma-separated seeds of the simulated side's draws (the ingress replica each "
        "arrival reaches, as Serve's proxy routes; with --policy-view books also the report "
        "delays and the Status probes' phase): the stack's row is the median seed's run, and "
        "the page shows the range over the seeds",
    )
    p.add_argument(
        "--reuse-live",
        type=Path,
        help="take the live side from this earlier run's --out directory (its records, "
        "calibration traces and scheduler logs) instead of running the mesh; the trace "
        "arguments must be that run's",
    )


def sim_seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--sim-seeds: {text!r} is not comma-separated integers") from None
    if not seeds or min(seeds) < 0:
        raise UsageError(f"--sim-seeds: {text!r}: give one or more seeds >= 0")
    return seeds


def calibrate_rates(text: str) -> list[float]:
    try:
        rates = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--calibrate-rate: {text!r} is not comma-separated numbers") from None
    if not rates or rates[0] <= 0:
        raise UsageError(f"--calibrate-rate: {text!r}: give one or more rates > 0")
    return rates


def _trace_parts(args: argparse.Namespace) -> list[str]:
    return [
        f"--classes {args.classes}",
        f"--replicas {args.replicas}",
        f"--max-num-seqs {args.max_num_seqs}",
        f"--max-num-batched-tokens {args.max_num_batched_tokens}",
    ]


def command_line(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (the page lists it)."""
    parts = [
        "slomesh bench-agree",
        f"--stacks {','.join(args.stacks)}",
        f"--requests {args.requests}",
        f"--rate {args.rate:g}",
        f"--seed {args.seed}",
    ]
    if args.scenario is not None:  # the scenario fixes the mesh, the profile, no calibration
        parts += [f"--scenario {args.scenario}"]
        parts += ["--sim-only"] * args.sim_only
        parts += [f"--live-lock {args.live_lock}"] * (args.live_lock is not None)
    elif args.sim_only:
        parts += [*_trace_parts(args), "--sim-only", f"--profile {args.profile}"]
    else:
        parts += _trace_parts(args)
        rates = ",".join(f"{r:g}" for r in args.calibrate_rates)
        parts += [f"--calibrate-requests {args.calibrate_requests}", f"--calibrate-rate {rates}"]
        if args.host_speed_window_s != 1.0:
            parts += [f"--host-speed-window {args.host_speed_window_s:g}"]
        parts += [f"--live-lock {args.live_lock}"] * (args.live_lock is not None)
    if args.policy_view != "books":
        parts += [f"--policy-view {args.policy_view}"]
    if args.sim_seeds != [0]:
        parts += [f"--sim-seeds {','.join(str(x) for x in args.sim_seeds)}"]
    parts += [f"--reuse-live {args.reuse_live}"] * (args.reuse_live is not None)
    parts += [f"--page {args.page}"]
    return " ".join(parts)
