"""`slomesh engine-check`: simulated-engine batch-1 latency and saturated throughput vs profile."""

from __future__ import annotations

import argparse

from shared.profiles.defaults import default_profile, default_profile_table
from shared.report.table import markdown_table
from slomesh.sim.engine_check import measure


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("engine-check", help="simulated engine vs its hardware profile")
    p.add_argument("--gpu", help="GPU name (default: every catalogued GPU x model)")
    p.add_argument("--model", help="model name (with --gpu)")
    p.add_argument("--context", type=int, default=1024, help="prompt tokens (default 1024)")
    p.add_argument("--tokens", type=int, default=256, help="output tokens (default 256)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.context < 1 or args.tokens < 2:
        raise ValueError("--context must be >= 1 and --tokens >= 2")
    if args.gpu or args.model:
        if not (args.gpu and args.model):
            raise ValueError("--gpu and --model go together")
        profiles = [default_profile(args.gpu, args.model)]
    else:
        profiles = default_profile_table()
    rows = []
    worst = 0.0
    for prof in profiles:
        r = measure(prof, args.context, args.tokens)
        worst = max(worst, r.batch1_error, r.saturated_error)
        rows.append(
            [
                f"{prof.gpu} x{prof.tensor_parallel}",
                prof.model,
                f"{r.batch1_ms_measured:.2f}",
                f"{r.batch1_ms_profile:.2f}",
                f"{r.batch1_error:.2%}",
                str(r.batch),
                f"{r.saturated_tok_s_measured:.0f}",
                f"{r.saturated_tok_s_profile:.0f}",
                f"{r.saturated_error:.2%}",
            ]
        )
    headers = [
        "gpu",
        "model",
        "batch-1 ms/tok sim",
        "profile",
        "err",
        "batch",
        "saturated tok/s sim",
        "profile",
        "err",
    ]
    print(markdown_table(headers, rows, left=(0, 1)))
    print(f"worst error: {worst:.2%} (context {args.context}, {args.tokens} output tokens)")
    return 0 if worst <= 0.05 else 1
