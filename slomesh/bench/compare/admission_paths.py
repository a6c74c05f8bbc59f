"""How slomesh admitted the requests of a `bench-mesh --compare` phase, from its spans.

The scheduler writes one `grouping` span per admission: for a placement on a lease credit (the
fast path: the ingress placed the request itself and told the scheduler in its next `Sync`)
with attribute `slomesh.fast_path` true; for an `Admit` call without it (`slomesh.queued` when
the request waited in the global queue first; `slomesh.admitted` false when refused). Both name
the replica in `slomesh.replica`. Counting them over a phase's window gives the share of
admissions that paid the scheduler's full round trip, and the placements per replica (a mesh
whose requests all go to one of several replicas shows here).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

SPAN = "grouping"
"""The scheduler's admission span."""


def _start_s(span: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(span["start_time"]).replace("Z", "+00:00")).timestamp()


def admission_paths(
    lines: Iterable[str], window: tuple[float, float] | None = None
) -> dict[str, Any]:
    """Counts of the scheduler's admissions starting inside `window` (unix seconds; all when
    None): `fast_path`, `admit` (admitted by Admit), `queued` (of those, after waiting in the
    queue), `refused`, and `by_replica` (placements per replica, both paths). Lines that are
    not such spans are skipped."""
    out: dict[str, Any] = {"fast_path": 0, "admit": 0, "queued": 0, "refused": 0}
    by_replica: dict[str, int] = {}
    for line in lines:
        line = line.strip()
        if not line.startswith("{") or f'"{SPAN}"' not in line:
            continue
        try:
            span = json.loads(line)
            start = _start_s(span)
        except (ValueError, KeyError, TypeError):
            continue
        if span.get("name") != SPAN or (window and not window[0] <= start <= window[1]):
            continue
        attrs = span.get("attributes") or {}
        if attrs.get("slomesh.admitted") is False:
            out["refused"] += 1
            continue
        if attrs.get("slomesh.fast_path"):
            out["fast_path"] += 1
        else:
            out["admit"] += 1
            out["queued"] += bool(attrs.get("slomesh.queued"))
        replica = attrs.get("slomesh.replica")
        if isinstance(replica, str):
            by_replica[replica] = by_replica.get(replica, 0) + 1
    out["by_replica"] = dict(sorted(by_replica.items()))
    return out


def admitted(paths: dict[str, Any]) -> int:
    """Admissions counted (fast path and Admit)."""
    return int(paths.get("fast_path", 0)) + int(paths.get("admit", 0))


def describe(paths: dict[str, Any]) -> str:
    """One line: the admissions by path and the placements per replica."""
    total = admitted(paths)
    if total == 0:
        return "no admissions recorded (no scheduler spans in the window)"
    share = 100.0 * paths["fast_path"] / total
    replicas = ", ".join(f"{k} {v}" for k, v in paths.get("by_replica", {}).items()) or "-"
    return (
        f"{total} admitted: {paths['fast_path']} on lease credits (fast path, {share:.0f}%), "
        f"{paths['admit']} by Admit ({paths['queued']} of them queued first); "
        f"{paths['refused']} refused; placements: {replicas}"
    )
