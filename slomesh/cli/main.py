"""Entry point of the `slomesh` console script."""

from __future__ import annotations

import argparse
import os
import sys

from pydantic import ValidationError

from shared.policy import UnknownNameError
from slomesh.cli import (
    bench,
    bench_agree,
    bench_goodput,
    bench_live,
    bench_mesh,
    bench_shards,
    bench_solver,
    conformance,
    engine_check,
    fidelity,
    gpu_config,
    plan,
    predictor,
    profile,
    profile_adapters,
    profile_forward,
    shards,
    up,
)
from slomesh.cli.errors import UsageError, describe


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slomesh", description="SLO-aware LLM serving control plane"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    bench.add_parser(sub)
    engine_check.add_parser(sub)
    up.add_parsers(sub)
    shards.add_parser(sub)
    bench_mesh.add_parser(sub)
    bench_shards.add_parser(sub)
    bench_goodput.add_parser(sub)
    bench_solver.add_parser(sub)
    bench_live.add_parser(sub)
    bench_agree.add_parser(sub)
    conformance.add_parser(sub)
    profile_forward.add_parser(sub)
    profile.add_parser(sub)
    profile_adapters.add_parser(sub)
    plan.add_parser(sub)
    gpu_config.add_parser(sub)
    predictor.add_parser(sub)
    fidelity.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # the embedded Ray of `slomesh up` authenticates its own RPCs with Ray's token (Ray reads
    # the mode before any of its processes start; RAY_AUTH_MODE=disabled turns it off)
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (UsageError, UnknownNameError, ValidationError, ValueError) as e:
        print(f"slomesh {args.command}: error: {describe(e)}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
