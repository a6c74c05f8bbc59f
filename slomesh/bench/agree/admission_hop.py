"""The live hop from the ingress to the scheduler's admission check, measured on a stack's trace,
for its simulation.

Live, the ingress stamps a request's arrival when it lets it in, asks the length predictor and
sends `Admit`; the scheduler checks it when that call reaches its event loop. The TTFT guard
counts the time between as already spent (services/scheduler/core/ttft_admission.py), and on a
small host whose engines take the cores it runs to seconds in bursts. The scheduler's report log
(`report_log_file`, services/scheduler/report_log.py) dates each admission check twice on the
host's wall clock: the request's arrival and the check.

The simulator replays those hops per request (slomesh/sim/live_view.py `admission_hops_s`):
each request of the trace takes the hop of the live admission stamped nearest its own send
time, within `max_gap_s` (the live requests carry the ingress's ids, not the trace's, and a
request the ingress turned away or placed on a lease credit has no check of its own: its
neighbour's hop is the one of that moment); with none that close it takes the base hop. The
base hop is the median over the lowest-rate calibration trace: the submit overhead calibrated
there (slomesh/bench/agree/calibrate.py) already holds it, so a simulated request reaches the
scheduler `overhead - base + hop` after it was sent, stamped `overhead - base` after it, and the
guard counts its hop as the live one does, with the same code.
"""

from __future__ import annotations

import bisect
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slomesh.bench.agree.workload import AgreeRequest

MAX_GAP_S = 0.5
"""A trace request takes the hop of a live admission stamped at most this far from its send."""


@dataclass(frozen=True)
class AdmissionHops:
    """The hops one stack's trace is simulated with (module docstring)."""

    by_request: dict[str, float] = field(default_factory=dict)
    """Trace request id -> the live hop nearest its send time, s."""
    base_s: float = 0.0
    """The median hop over the lowest-rate calibration trace, s (0: none measured)."""
    measured: int = 0
    """Admission checks logged over the trace."""


def logged_hops(path: Path, since_unix_s: float, until_unix_s: float) -> list[tuple[float, float]]:
    """(arrival, hop) of the admissions in the log at `path` that arrived in
    [`since_unix_s`, `until_unix_s`), by arrival; empty without a log."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if "admitted_s" in row and since_unix_s <= row["arrival_s"] < until_unix_s:
            out.append((row["arrival_s"], max(0.0, row["admitted_s"] - row["arrival_s"])))
    return sorted(out)


def nearest(
    sent_s: Mapping[str, float], hops: Sequence[tuple[float, float]], max_gap_s: float = MAX_GAP_S
) -> dict[str, float]:
    """Each request of `sent_s` (id -> send time) with the hop of `hops` ((time, hop), sorted,
    on the same clock) nearest in time, if one is within `max_gap_s`."""
    times = [t for t, _ in hops]
    out = {}
    for rid, t in sent_s.items():
        k = bisect.bisect_left(times, t)
        near = [j for j in (k - 1, k) if 0 <= j < len(times)]
        j = min(near, key=lambda j: abs(times[j] - t), default=None)
        if j is not None and abs(times[j] - t) <= max_gap_s:
            out[rid] = hops[j][1]
    return out


def admission_hops(
    path: Path, trace: Sequence[AgreeRequest], env: Mapping[str, Any]
) -> AdmissionHops:
    """The hops of the log at `path` for `trace` (each request sent at its arrival offset), with
    the run's `env` (bench-agree's environment of the stack): `trace_origin_unix_s`, the wall
    time of offset 0, and `calibration_unix_s`, each calibration rate's [start, end)."""
    origin = env.get("trace_origin_unix_s")
    if origin is None:  # a run from before the log had admissions: none measured
        return AdmissionHops()
    windows = env.get("calibration_unix_s", {})
    base = 0.0
    if windows:
        start, end = windows[min(windows, key=float)]
        low = [hop for _, hop in logged_hops(path, start, end)]
        base = statistics.median(low) if low else 0.0
    hops = [(t - origin, hop) for t, hop in logged_hops(path, origin, float("inf"))]
    sent = {r.request_id: r.arrival_s for r in trace}
    return AdmissionHops(nearest(sent, hops), base, len(hops))


def describe(hops: AdmissionHops) -> str:
    """The hops in words for the page."""
    if not hops.measured:
        return "no admission hop measured (the calibrated submit overhead only)"
    values = sorted(hops.by_request.values())
    if not values:
        return (
            f"admission hop base {hops.base_s * 1e3:.0f} ms ({hops.measured} checks, none matched)"
        )
    q = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
    return (
        f"admission hop base {hops.base_s * 1e3:.0f} ms, over the trace median "
        f"{statistics.median(values) * 1e3:.0f} ms, p10-p90 {q[0] * 1e3:.0f}-"
        f"{q[-1] * 1e3:.0f} ms, max {values[-1] * 1e3:.0f} ms ({hops.measured} checks, "
        f"{len(values)} trace requests matched)"
    )
