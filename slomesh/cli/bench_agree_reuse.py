"""`bench-agree --reuse-live DIR`: the live side of an earlier run, read back from its files.

A live run writes each stack's records (`live-STACK.json`), its calibration traces' records
(`live-calibration-STACK-RATE.json`), its scheduler's logs (`rwt-STACK.jsonl`,
`reports-STACK.jsonl`) and the report with the host's load around each stack (`agree.json`)
into its --out directory. Reading them back gives the simulated side everything the live run
gave it (calibration, host speed, report delays, admission hops:
slomesh/cli/bench_agree_live.py `derive`), so the simulator can be run again on the same live
records, as many times as needed, without the mesh or the live lock. The trace must be the one
that was run: the stored report's trace arguments are checked against this invocation's.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from shared.domain import HardwareProfile
from shared.metrics.records import RequestRecord
from slomesh.bench.agree.page import trace_key
from slomesh.bench.agree.workload import AgreeRequest, AgreeWorkloadSpec
from slomesh.cli.bench_agree_live import LiveResults, derive


def _records(path: Path) -> list[RequestRecord]:
    return [RequestRecord(**d) for d in json.loads(path.read_text())]


def reuse_live(
    args: argparse.Namespace,
    spec: AgreeWorkloadSpec,
    trace: Sequence[AgreeRequest],
    profile: HardwareProfile,
    replicas: int,
) -> LiveResults:
    """The live results of `args.stacks` stored in `args.reuse_live` (module docstring); a
    stack without stored records is left out (named on stdout). Raises ValueError when the
    stored run's trace differs from this one's."""
    src: Path = args.reuse_live
    stored = src / "agree.json"
    if not stored.exists():
        raise ValueError(f"--reuse-live: {stored} not found (give a live run's --out directory)")
    report = json.loads(stored.read_text())
    ours = trace_key(
        {k: getattr(args, k) for k in ("requests", "rate", "seed", "classes")}
        | {
            "replicas": args.replicas,
            "max_num_seqs": args.max_num_seqs,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "profile": args.profile,
        }
    )
    if trace_key(report["args"]) != ours:
        raise ValueError(
            f"--reuse-live: {stored} was run on another trace ({trace_key(report['args'])}); "
            f"this invocation's is {ours}"
        )
    env = report.get("environment", {})
    res = LiveResults()
    for stack in args.stacks:
        path = src / f"live-{stack}.json"
        if not path.exists():
            print(f"# --reuse-live: no live records of {stack} in {src}: left out", flush=True)
            continue
        res.records[stack] = _records(path)
        cal = {
            rate: _records(f)
            for rate in args.calibrate_rates
            if (f := src / f"live-calibration-{stack}-{rate:g}.json").exists()
        }
        if stack in env:
            res.env[stack] = env[stack]
        swaps = report.get("swaps", {}).get(stack, {}).get("by_replica")
        if swaps:  # the replicas' swap logs (the simulator's load slowdown is fitted on them)
            res.swaps[stack] = swaps
        derive(args, spec, trace, profile, replicas, stack, cal, res, src)
    return res
