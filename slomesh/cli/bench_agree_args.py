"""`slomesh bench-agree`'s arguments: the calibration rates it parses and the command line that
reproduces a run (the page lists it)."""

from __future__ import annotations

import argparse

from slomesh.cli.errors import UsageError


def calibrate_rates(text: str) -> list[float]:
    try:
        rates = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--calibrate-rate: {text!r} is not comma-separated numbers") from None
    if not rates or rates[0] <= 0:
        raise UsageError(f"--calibrate-rate: {text!r}: give one or more rates > 0")
    return rates


def command_line(args: argparse.Namespace) -> str:
    """The command line that reproduces this run (the page lists it)."""
    parts = [
        "slomesh bench-agree",
        f"--stacks {','.join(args.stacks)}",
        f"--requests {args.requests}",
        f"--rate {args.rate:g}",
        f"--seed {args.seed}",
    ]
    if args.scenario is not None:
        parts += [f"--scenario {args.scenario}"]
        parts += ["--sim-only"] * args.sim_only
        parts += [f"--live-lock {args.live_lock}"] * (args.live_lock is not None)
        return " ".join([*parts, f"--page {args.page}"])
    parts += [
        f"--classes {args.classes}",
        f"--replicas {args.replicas}",
        f"--max-num-seqs {args.max_num_seqs}",
        f"--max-num-batched-tokens {args.max_num_batched_tokens}",
    ]
    if args.sim_only:
        parts += ["--sim-only", f"--profile {args.profile}"]
    else:
        rates = ",".join(f"{r:g}" for r in args.calibrate_rates)
        parts += [f"--calibrate-requests {args.calibrate_requests}", f"--calibrate-rate {rates}"]
        if args.host_speed_window_s != 1.0:
            parts += [f"--host-speed-window {args.host_speed_window_s:g}"]
        parts += [f"--live-lock {args.live_lock}"] * (args.live_lock is not None)
    parts += [f"--page {args.page}"]
    return " ".join(parts)
