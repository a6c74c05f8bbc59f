"""The decode step the live mesh delivered, as a function of the batch: fitted from vLLM's
per-request results of every rate of a ladder.

On the live mesh a decode step pays the engine's compute and the control plane's CPU for the
tokens it streams (the replica's vLLM front end, the relay, the ingress, on the same cores), and
both grow with the number of streams. Each served request gives one point: its time per output
token after the first (vLLM's TPOT) against the mean number of requests streaming per engine
over its own stream (all the rate's served requests' streams, from the client's timings, over
the engines). The points are grouped by that batch rounded to a whole request, each group's
median TPOT taken (one stall of the machine moves a median little), and a line
`TPOT = intercept + per_request * batch` is fitted to the medians, each weighted by its group's
size. The line is the calibrated profile's decode step (`slomesh/bench/goodput/sim.py`).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slomesh.bench.goodput.confusion import Offered

SAMPLES_PER_STREAM = 16
"""Points at which a stream's batch is read (their mean is its batch)."""


@dataclass(frozen=True)
class DecodeLine:
    """Seconds per decode step: intercept_s + per_request_s * batch."""

    intercept_s: float
    per_request_s: float
    points: int
    """Served requests the line was fitted on."""

    def step_s(self, batch: float) -> float:
        return self.intercept_s + self.per_request_s * batch


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


def fit_decode_line(rates: Iterable[Sequence[Offered]], engines: int) -> DecodeLine | None:
    """The line of the module docstring over every rate's served requests; None with fewer than
    two distinct batches (nothing to fit a slope to)."""
    groups: dict[int, list[float]] = {}
    n = 0
    for offered in rates:
        served = [r for r in offered if r.outcome == "served" and r.output_tokens > 1]
        for r, batch in zip(served, stream_batches(served, engines), strict=True):
            groups.setdefault(max(1, round(batch)), []).append(r.tpot_s)
            n += 1
    if len(groups) < 2:
        return None
    xs = list(groups)
    ys = [statistics.median(groups[x]) for x in xs]
    ws = [len(groups[x]) for x in xs]
    total = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs, strict=True)) / total
    my = sum(w * y for w, y in zip(ws, ys, strict=True)) / total
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs, strict=True))
    sxy = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys, strict=True))
    slope = max(0.0, sxy / sxx) if sxx > 0 else 0.0
    intercept = my - slope * mx
    if intercept < 0:  # a step never costs less than nothing: the line through the origin
        slope = sum(w * x * y for w, x, y in zip(ws, xs, ys, strict=True)) / sum(
            w * x * x for w, x in zip(ws, xs, strict=True)
        )
        intercept = 0.0
    return DecodeLine(intercept, slope, n)
