"""`slomesh predictor loso`: leave-one-source-out evaluation of the learned predictor's prior.

For each source of the llm-responses data (arena-hard, gsm8k, fastchat), trains a model on the
other sources (calibration included, same TrainConfig as `train`) and evaluates it on the held-out
one (`services/predictor/loso.py`). Prints a markdown table; `--out DIR` writes `loso.json` (every
row, with the baselines) and each trained model as `loso-<source>.npz` (+ .json), e.g. for
`slomesh predictor replay --model DIR/loso-gsm8k.npz` on a stream of the source it never saw:
with `--out`, each held-out source is also written as a replay stream `stream-<source>.jsonl`
(`--stream-lines` lines of it in a seeded random order: prompt, model, tenant, input and output
tokens).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING

from slomesh.cli.errors import UsageError

if TYPE_CHECKING:
    from services.predictor.core.learned.dataset import LengthExample
    from services.predictor.core.learned.predictor import LearnedPredictor

DATA_HELP = "llm-responses directory (default: ../shared/data/llm-responses beside the repo)"
TARGET_TAU = 0.35
TARGET_P90 = (0.85, 0.95)
TARGET_MS = 2.0
DEFAULT_STREAM_LINES = 1700


def add_loso_parser(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `loso` under `slomesh predictor`."""
    lo = cmds.add_parser(
        "loso", help="leave-one-source-out: train on the other sources, evaluate on each one"
    )
    lo.add_argument("--data", help=DATA_HELP)
    lo.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    lo.add_argument(
        "--source",
        action="append",
        help="hold out only this source (repeatable; default: every source in turn)",
    )
    lo.add_argument(
        "--out", help="directory for loso.json, the loso-<source>.npz models and the streams"
    )
    lo.add_argument(
        "--stream-lines",
        type=int,
        default=DEFAULT_STREAM_LINES,
        help=f"lines of each stream-<source>.jsonl (default {DEFAULT_STREAM_LINES})",
    )
    lo.set_defaults(func=run_loso)


def _safe(source: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in source)


def write_stream(
    path: Path, examples: list[LengthExample], source: str, lines: int, seed: int
) -> int:
    """`lines` examples of `source` in a seeded random order as replay lines; how many."""
    rows = [e for e in examples if e.tenant == source]
    random.Random(f"{seed}:{source}").shuffle(rows)
    with path.open("w", encoding="utf-8") as f:
        for e in rows[:lines]:
            obj = {
                "prompt": e.prompt,
                "model": e.model,
                "tenant": e.tenant,
                "input_tokens": e.input_tokens,
                "output_tokens": e.output_tokens,
            }
            f.write(json.dumps(obj) + "\n")
    return min(lines, len(rows))


def run_loso(args: argparse.Namespace) -> int:
    from services.predictor.data import load_llm_responses
    from services.predictor.loso import leave_one_source_out, markdown_table, sources_of
    from services.predictor.model_store import save_model

    examples = load_llm_responses(args.data)
    known = sources_of(examples)
    if args.source:
        bad = [s for s in args.source if s not in known]
        if bad:
            raise UsageError(f"--source {bad[0]!r} is not a source of the data; one of {known}")
    out = Path(args.out) if args.out else None
    if args.stream_lines < 2:
        raise UsageError(f"--stream-lines must be >= 2, got {args.stream_lines}")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    def keep(source: str, model: LearnedPredictor) -> None:
        if out is not None:
            save_model(model, out / f"loso-{_safe(source)}.npz")
            n = write_stream(
                out / f"stream-{_safe(source)}.jsonl",
                examples,
                source,
                args.stream_lines,
                args.seed,
            )
            print(f"{source}: model loso-{_safe(source)}.npz, stream of {n} lines", flush=True)

    results = leave_one_source_out(examples, seed=args.seed, sources=args.source, on_model=keep)
    print(markdown_table(results))
    lo, hi = TARGET_P90
    for r in results:
        tau = r.learned.kendall_tau
        misses = []
        if tau is None or tau < TARGET_TAU:
            misses.append(f"tau < {TARGET_TAU}")
        if not lo <= r.learned.p90_coverage <= hi:
            misses.append(f"p90 coverage outside {lo:.0%}-{hi:.0%}")
        if r.unbatched_ms_per_request > TARGET_MS:
            misses.append(f"> {TARGET_MS} ms/request")
        print(f"{r.source}: " + ("targets met" if not misses else "MISSED " + ", ".join(misses)))
    if out is not None:
        path = out / "loso.json"
        body = {"seed": args.seed, "sources": [r.to_dict() for r in results]}
        path.write_text(json.dumps(body, indent=2) + "\n")
        print(f"wrote {path} and the held-out models loso-<source>.npz in {out}")
    return 0
