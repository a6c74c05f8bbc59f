"""How much two engine restarts at once slowed each other live: the simulator's
`ClusterSpec.concurrent_load_slowdown`, fitted on a run's measured swaps.

Each replica times its swaps (`SwapRecord`: start, seconds). The simulator runs loads on one
host processor-shared (slomesh/sim/host_loads.py): while two run, each does its work at
1 / (1 + a) of its speed. A swap whose solo time is W (the profile's, what the simulator
charges) and that ran `o` of its seconds beside another replica's swap then takes
d = W + o x a / (1 + a). The fit is least squares through the origin on the swaps that
overlapped: b = sum((d - W) o) / sum(o^2), a = b / (1 - b), b clipped to [0, MAX_SHARE]. Swaps
alone carry no information on `a` (o = 0) and leave the fit unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_SHARE = 0.9
"""The largest share of an overlap's seconds the fit charges as extra (a = 9)."""


@dataclass(frozen=True, slots=True)
class LoadSlowdown:
    slowdown: float
    """The fitted `concurrent_load_slowdown` (0 with no overlapping swap)."""
    overlapping: int
    """Swaps that ran beside another replica's: what the fit rests on."""


def _spans(logs: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, float, float]]:
    return [
        (name, str(s.get("to_model", "")), float(s["started_unix_s"]), float(s["seconds"]))
        for name, log in logs.items()
        for s in log.get("swaps", [])
        if s.get("ok") and s.get("started_unix_s")
    ]


def overlap_s(spans: list[tuple[str, str, float, float]], k: int) -> float:
    """Seconds of swap `k` during which another replica's swap ran (the union of overlaps)."""
    name, _, t, d = spans[k]
    cuts = sorted(
        (max(t, t2), min(t + d, t2 + d2))
        for o, _, t2, d2 in spans
        if o != name and t2 < t + d and t < t2 + d2
    )
    total, end = 0.0, t
    for a, b in cuts:
        a = max(a, end)
        if b > a:
            total += b - a
            end = b
    return total


def fit_load_slowdown(
    logs: Mapping[str, Mapping[str, Any]], solo_s: Mapping[str, float]
) -> LoadSlowdown:
    """The slowdown fitted on the swap logs of a run's replicas (replica -> its SwapLog:
    `swaps`, each with to_model, started_unix_s, seconds, ok), each swap's solo time the
    profile's for the model it loaded (`solo_s`; a model without one: left out)."""
    spans = _spans(logs)
    num = den = 0.0
    used = 0
    for k, (_, model, _, d) in enumerate(spans):
        o = overlap_s(spans, k)
        if o <= 0.0 or model not in solo_s:
            continue
        used += 1
        num += (d - solo_s[model]) * o
        den += o * o
    if not used:
        return LoadSlowdown(0.0, 0)
    share = min(max(num / den, 0.0), MAX_SHARE)
    return LoadSlowdown(share / (1.0 - share), used)
