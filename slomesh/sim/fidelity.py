"""Per-request fidelity of the simulated engine against a real one on the same trace.

For each request and metric (TTFT, TPOT, E2E) the relative error is (sim - real) / real; the
summary gives the median and p90 of its absolute value (numpy's linear-interpolated percentiles),
the median signed error (the bias: > 0 when the sim is slow), and the means of both engines. The
issue's target is a median absolute error of TTFT and E2E <= 10%.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from shared.report.table import markdown_table
from slomesh.sim.replay import RequestTiming

METRICS: dict[str, Callable[[RequestTiming], float]] = {
    "TTFT": lambda t: t.ttft_s,
    "TPOT": lambda t: t.tpot_s,
    "E2E": lambda t: t.e2e_s,
}
TARGET_MEDIAN_ABS_ERR = 0.10
"""The issue's bar for TTFT and E2E."""


@dataclass(frozen=True, slots=True)
class MetricError:
    metric: str
    requests: int
    median_abs_err: float
    p90_abs_err: float
    median_signed_err: float
    mean_real_s: float
    mean_sim_s: float


def paired(
    real: Sequence[RequestTiming], sim: Sequence[RequestTiming]
) -> list[tuple[RequestTiming, RequestTiming]]:
    """(real, sim) pairs by request id; both sides must hold the same requests."""
    by_id = {t.request_id: t for t in sim}
    if len(by_id) != len(sim) or {t.request_id for t in real} != set(by_id) or not real:
        raise ValueError("real and sim timings must cover the same, non-empty set of requests")
    return [(r, by_id[r.request_id]) for r in real]


def median_timings(runs: Sequence[Sequence[RequestTiming]]) -> list[RequestTiming]:
    """Per request, the median TTFT and E2E over repeated runs of one trace (first run's order)."""
    if not runs:
        raise ValueError("median_timings needs at least one run")
    by_run = [{t.request_id: t for t in run} for run in runs]
    out = []
    for t in runs[0]:
        same = [b[t.request_id] for b in by_run]
        out.append(
            replace(
                t,
                ttft_s=float(np.median([x.ttft_s for x in same])),
                e2e_s=float(np.median([x.e2e_s for x in same])),
            )
        )
    return out


def relative_errors(
    real: Sequence[RequestTiming], sim: Sequence[RequestTiming], metric: str
) -> list[float]:
    """(sim - real) / real per request (requests whose real value is 0 are skipped)."""
    get = METRICS[metric]
    return [(get(s) - get(r)) / get(r) for r, s in paired(real, sim) if get(r) > 0]


def compare(real: Sequence[RequestTiming], sim: Sequence[RequestTiming]) -> list[MetricError]:
    pairs = paired(real, sim)
    out = []
    for name, get in METRICS.items():
        err = np.asarray(relative_errors(real, sim, name), dtype=np.float64)
        if err.size == 0:
            raise ValueError(f"no request has a positive real {name}")
        absolute = np.abs(err)
        out.append(
            MetricError(
                metric=name,
                requests=int(err.size),
                median_abs_err=float(np.median(absolute)),
                p90_abs_err=float(np.percentile(absolute, 90)),
                median_signed_err=float(np.median(err)),
                mean_real_s=float(np.mean([get(r) for r, _ in pairs])),
                mean_sim_s=float(np.mean([get(s) for _, s in pairs])),
            )
        )
    return out


def meets_target(errors: Sequence[MetricError]) -> bool:
    """TTFT and E2E median absolute errors within TARGET_MEDIAN_ABS_ERR."""
    return all(e.median_abs_err <= TARGET_MEDIAN_ABS_ERR for e in errors if e.metric != "TPOT")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def fidelity_table(errors: Sequence[MetricError], names: tuple[str, str] = ("real", "sim")) -> str:
    headers = [
        "metric",
        "median abs err %",
        "p90 abs err %",
        "median signed err %",
        f"mean {names[0]} ms",
        f"mean {names[1]} ms",
    ]
    rows = [
        [
            e.metric,
            f"{100 * e.median_abs_err:.1f}",
            f"{100 * e.p90_abs_err:.1f}",
            f"{100 * e.median_signed_err:+.1f}",
            _ms(e.mean_real_s),
            _ms(e.mean_sim_s),
        ]
        for e in errors
    ]
    return markdown_table(headers, rows)
