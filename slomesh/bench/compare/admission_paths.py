"""How slomesh admitted the requests of a `bench-mesh --compare` phase, from its schedulers'
admission counters (services/scheduler/admission_counts.py), read before and after the phase.

Traces are head-sampled (shared/telemetry.py), so spans cannot count admissions; every
scheduler shard counts them instead: placements on lease credits (the fast path: the ingress
placed the request itself and told the scheduler in its next `Sync`), admissions by `Admit`
(of them those that waited in the global queue first), refusals, placements per replica, and the
`Sync` calls that carried the fast path's placements (each a round trip the scheduler pays).
The difference over a phase gives the share of admissions that paid the scheduler's full round
trip, and the placements per replica (a mesh whose requests all go to one of several replicas
shows here).

The counters are read by a short-lived driver process (`python -m
slomesh.bench.compare.admission_paths CONFIG`) that joins the mesh's Ray cluster, asks each
scheduler shard's `AdmissionCounts` over its Serve handle and prints their sum as one JSON line:
the bench process never joins Ray, and the reads happen outside the measured windows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SCHEDULER_IMPORT = "services.scheduler.deployment:build_app"
"""The import path of a scheduler shard's application."""
COUNTS = ("fast_path", "admit", "queued", "refused", "sync_calls")


def shard_names(config: dict[str, Any]) -> list[str]:
    """The scheduler shards' application names of a mesh config."""
    return [a["name"] for a in config["applications"] if a.get("import_path") == SCHEDULER_IMPORT]


def total(snapshots: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The sum of several shards' counters."""
    out: dict[str, Any] = dict.fromkeys(COUNTS, 0)
    by_replica: dict[str, int] = {}
    for snap in snapshots:
        for key in COUNTS:
            out[key] += int(snap.get(key, 0))
        for replica, n in (snap.get("by_replica") or {}).items():
            by_replica[replica] = by_replica.get(replica, 0) + int(n)
    out["by_replica"] = dict(sorted(by_replica.items()))
    return out


def difference(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """The admissions between two readings (replicas with none left out)."""
    out: dict[str, Any] = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in COUNTS}
    old = before.get("by_replica") or {}
    by = {r: int(n) - int(old.get(r, 0)) for r, n in (after.get("by_replica") or {}).items()}
    out["by_replica"] = {r: n for r, n in sorted(by.items()) if n}
    return out


def read(config_path: Path, timeout_s: float = 45.0) -> dict[str, Any] | None:
    """The mesh's admission counters now (the sum over its shards), by a driver process of its
    own; None when it cannot read them (the reason goes to stderr)."""
    cmd = [sys.executable, "-m", "slomesh.bench.compare.admission_paths", str(config_path)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as err:
        print(f"admission counters: not read: {err!r}", file=sys.stderr)
        return None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"status {done.returncode}"])[-1]
        print(f"admission counters: not read: {why}", file=sys.stderr)
        return None
    parsed: dict[str, Any] = json.loads(lines[-1])
    return parsed


def admitted(paths: dict[str, Any]) -> int:
    """Admissions counted (fast path and Admit)."""
    return int(paths.get("fast_path", 0)) + int(paths.get("admit", 0))


def describe(paths: dict[str, Any]) -> str:
    """One line: the admissions by path and the placements per replica."""
    total_n = admitted(paths)
    if total_n == 0:
        return "no admissions counted (the schedulers' counters did not move)"
    share = 100.0 * paths["fast_path"] / total_n
    replicas = ", ".join(f"{k} {v}" for k, v in paths.get("by_replica", {}).items()) or "-"
    line = (
        f"{total_n} admitted: {paths['fast_path']} on lease credits (fast path, {share:.0f}%), "
        f"{paths['admit']} by Admit ({paths['queued']} of them queued first); "
        f"{paths['refused']} refused; placements: {replicas}"
    )
    syncs = int(paths.get("sync_calls", 0))
    if syncs:
        line += f"; {syncs} Sync calls ({syncs / total_n:.2f} per admission)"
    return line


async def _ask(names: list[str], timeout_s: float) -> list[dict[str, Any]]:
    # on an event loop: the handle's router may run on the caller's loop (slomesh/cli/status.py)
    import asyncio

    from ray import serve

    out = []
    for name in names:
        async with asyncio.timeout(timeout_s):
            out.append(await serve.get_app_handle(name).AdmissionCounts.remote())
    return out


def main(argv: list[str]) -> int:
    """Print the summed counters of the shards of the mesh config at argv[0] (running now)."""
    import asyncio
    import logging
    import os

    # the mesh's embedded Ray checks Ray's token, as `slomesh up` set it (slomesh/cli/main.py)
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    import ray
    import yaml

    from slomesh.launch.mesh import loopback_node

    config = yaml.safe_load(Path(argv[0]).read_text())
    # the mesh's embedded node is a loopback one (`slomesh up`): a driver joins it there
    ray.init(
        address="auto",
        log_to_driver=False,
        logging_level=logging.ERROR,
        **loopback_node("127.0.0.1"),
    )
    try:
        snapshots = asyncio.run(_ask(shard_names(config), 20.0))
    finally:
        ray.shutdown()
    print(json.dumps(total(snapshots)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
