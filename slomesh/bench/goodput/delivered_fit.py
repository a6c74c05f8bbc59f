"""The decode step the live mesh delivered, as a function of the batch: fitted from vLLM's
per-request results of every rate of a ladder.

On the live mesh a decode step pays the engine's compute and the control plane's CPU for the
tokens it streams (the replica's vLLM front end, the relay, the ingress, on the same cores), and
both grow with the number of streams; the control plane's work for every request that arrives
(parsing, tokenizing, admission, the answer of a rejected one) takes the same cores too. Each
served request gives one point: its time per output token after the first (vLLM's TPOT)
against the mean number of requests streaming per engine over its own stream (all the rate's
served requests' streams, from the client's timings, over the engines) and the rate offered.
The points are grouped by rate and by that batch rounded to a whole request, and each group's
step taken: by default its median TPOT (one stall of the machine moves a median little); with
`statistic="per-token"`, the group's streaming time over its tokens (every stall counted: a
stall costs the live mesh the tokens it did not stream, which decides attainment on a trace at
capacity, where the median's quicker step served a backlog the live mesh did not). Then a plane
`TPOT = intercept + per_request * batch + per_offered_rps * rate` is fitted to the group steps,
each weighted by its group's size (with one rate, or a negative rate term, the line without
it). It is the calibrated profile's decode step (`slomesh/bench/goodput/sim.py`).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from slomesh.bench.goodput.confusion import Offered

SAMPLES_PER_STREAM = 16
"""Points at which a stream's batch is read (their mean is its batch)."""


@dataclass(frozen=True)
class DecodeLine:
    """Seconds per decode step: intercept_s + per_request_s * batch + per_offered_s * rate."""

    intercept_s: float
    per_request_s: float
    points: int
    """Served requests the line was fitted on."""
    per_offered_s: float = 0.0
    """Seconds per step per request/s offered."""

    def step_s(self, batch: float, rate_rps: float = 0.0) -> float:
        return self.intercept_s + self.per_request_s * batch + self.per_offered_s * rate_rps


def stream_batches(served: Sequence[Offered], engines: int) -> list[float]:
    """For each served request (same order), the mean number of streams per engine while it
    streamed (itself included)."""
    spans = [
        (r.arrival_s + r.ttft_s, r.arrival_s + r.ttft_s + r.tpot_s * max(0, r.output_tokens - 1))
        for r in served
    ]
    starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans)
    out = []
    for begin, end in spans:
        if end <= begin:
            out.append(1.0 / max(1, engines))
            continue
        step = (end - begin) / SAMPLES_PER_STREAM
        counts = []
        for k in range(SAMPLES_PER_STREAM):
            t = begin + (k + 0.5) * step
            counts.append(bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t))
        out.append(max(1.0, statistics.fmean(counts)) / max(1, engines))
    return out


def _solve(rows: list[tuple[float, ...]], ys: list[float], ws: list[float]) -> list[float] | None:
    """Weighted least squares (normal equations, Gaussian elimination); None if singular."""
    k = len(rows[0])
    m = [
        [sum(w * r[i] * r[j] for r, w in zip(rows, ws, strict=True)) for j in range(k)]
        for i in range(k)
    ]
    v = [sum(w * r[i] * y for r, y, w in zip(rows, ys, ws, strict=True)) for i in range(k)]
    for c in range(k):
        pivot = max(range(c, k), key=lambda i: abs(m[i][c]))
        if abs(m[pivot][c]) < 1e-18:
            return None
        m[c], m[pivot], v[c], v[pivot] = m[pivot], m[c], v[pivot], v[c]
        for i in range(k):
            if i != c:
                f = m[i][c] / m[c][c]
                m[i] = [a - f * b for a, b in zip(m[i], m[c], strict=True)]
                v[i] -= f * v[c]
    return [v[i] / m[i][i] for i in range(k)]


Statistic = Literal["median", "per-token"]
"""How a group's step is taken from its requests (module docstring)."""


def _step(group: list[Offered], statistic: Statistic) -> float:
    if statistic == "median":
        return statistics.median(r.tpot_s for r in group)
    gaps = sum(r.output_tokens - 1 for r in group)
    return sum(r.tpot_s * (r.output_tokens - 1) for r in group) / gaps


def fit_decode_line(
    rates: Mapping[float, Sequence[Offered]], engines: int, statistic: Statistic = "median"
) -> DecodeLine | None:
    """The plane of the module docstring over every rate's served requests (`rates` maps the
    offered rate to its requests), each group's step taken by `statistic`; None with fewer
    than two distinct batches."""
    groups: dict[tuple[float, int], list[Offered]] = {}
    n = 0
    for rate, offered in rates.items():
        served = [r for r in offered if r.outcome == "served" and r.output_tokens > 1]
        for r, batch in zip(served, stream_batches(served, engines), strict=True):
            groups.setdefault((rate, max(1, round(batch))), []).append(r)
            n += 1
    if len({b for _, b in groups}) < 2:
        return None
    keys = list(groups)
    ys = [_step(groups[k], statistic) for k in keys]
    ws = [float(len(groups[k])) for k in keys]
    if len({r for r, _ in keys}) > 1:
        got = _solve([(1.0, float(b), r) for r, b in keys], ys, ws)
        if got is not None and got[0] >= 0 and got[1] >= 0 and got[2] >= 0:
            return DecodeLine(got[0], got[1], n, got[2])
    got = _solve([(1.0, float(b)) for _, b in keys], ys, ws)
    if got is not None and got[0] >= 0 and got[1] >= 0:
        return DecodeLine(got[0], got[1], n)
    # a step never costs less than nothing: the line through the origin
    slope = sum(w * b * y for (_, b), y, w in zip(keys, ys, ws, strict=True)) / sum(
        w * b * b for (_, b), w in zip(keys, ws, strict=True)
    )
    return DecodeLine(0.0, max(0.0, slope), n)
