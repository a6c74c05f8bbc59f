"""Aggregate one run's request records into a stack summary (SLO attainment, goodput, tails).

Conventions:
- Attainment counts every request in the denominator: rejected and unfinished ones are not met.
- Latency percentiles (numpy, linear interpolation) are over finished requests only; None when
  no request finished.
- Rates divide by the run's simulated duration (end_s - start_s); a zero or negative duration
  gives rates of 0.0 rather than a division by zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from shared.metrics.fairness import jain_of_service, tenant_service
from shared.metrics.records import InstanceStats, RequestRecord, RunResult

SIGNIFICANT_DIGITS = 6


def round_sig(value: float, digits: int = SIGNIFICANT_DIGITS) -> float | None:
    """`value` rounded to `digits` significant digits; None for NaN or infinity (not JSON)."""
    if not math.isfinite(value):
        return None
    if value == 0.0:
        return 0.0
    return float(f"{value:.{digits}g}")


def _json_value(value: Any) -> Any:
    """A JSON-ready copy of a summary field: floats rounded, ints and None kept, dicts recursed."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return round_sig(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, ClassSummary):
        return value.to_dict()
    raise TypeError(f"unexpected summary value {value!r}")


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation; None for an empty list."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q, method="linear"))


def _fraction(num: int, den: int) -> float:
    return num / den if den > 0 else 0.0


def _rate(count: float, duration_s: float) -> float:
    return count / duration_s if duration_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ClassSummary:
    """Attainment and latency for the requests of one SLO class."""

    requests: int
    attainment: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    e2e_p50_s: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (floats rounded to 6 significant digits, None kept)."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class StackSummary:
    """Everything the bench reports about one stack's run. Field names are the JSON keys."""

    stack: str
    slo_attainment: float
    attainment_by_class: dict[str, float]
    tpot_attainment_admitted: float
    """Of the finished requests with a TPOT target, the share that met it (SCORPIO's TPOT guard
    protects admitted requests; rejected ones are not in the denominator). 1.0 when none."""
    goodput_rps: float
    throughput_rps: float
    throughput_tok_s: float
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    tpot_p99_s: float | None
    e2e_p50_s: float | None
    e2e_p90_s: float | None
    e2e_p99_s: float | None
    rejected: int
    unfinished: int
    requests: int
    evictions: int
    swaps: int
    gpu_busy: float
    kv_occupancy_mean: float
    load_imbalance_s: float
    wall_s: float
    duration_s: float
    by_class: dict[str, ClassSummary] = field(default_factory=dict)
    prefix_hit_rate: float = 0.0
    """Share of the prompt tokens the engines' prefix caches served (not prefilled)."""
    jain_index: float = 1.0
    """Jain's index of per-tenant service (tokens served while arrivals last) normalised by
    each tenant's max-min fair share (shared/metrics/fairness.py); 1.0 with one tenant."""
    attainment_by_tenant: dict[str, float] = field(default_factory=dict)
    """SLO attainment per tenant (rejected requests count as missed)."""
    attainment_by_band: dict[str, float] = field(default_factory=dict)
    """SLO attainment per criticality band ("critical" > 0, "standard" 0, "sheddable" < 0)."""
    rejected_by_band: dict[str, int] = field(default_factory=dict)
    """Rejected (and shed) requests per band."""
    reject_answer_max_s_by_band: dict[str, float] = field(default_factory=dict)
    """Per band, the longest time from a rejected (or shed) request's arrival to its answer
    (bands with no rejection left out): "answered at once" is 0."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values in field order; floats rounded to 6 significant digits."""
        return {f.name: _json_value(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class _Latencies:
    ttft: list[float]
    tpot: list[float]
    e2e: list[float]


def _latencies(records: list[RequestRecord]) -> _Latencies:
    """TTFT / TPOT / E2E samples of the finished requests among `records`."""
    ttft: list[float] = []
    tpot: list[float] = []
    e2e: list[float] = []
    for r in records:
        if not r.finished:
            continue
        t, p, e = r.ttft_s, r.tpot_s, r.e2e_s
        if t is not None:
            ttft.append(t)
        if p is not None:
            tpot.append(p)
        if e is not None:
            e2e.append(e)
    return _Latencies(ttft, tpot, e2e)


def _class_summary(records: list[RequestRecord]) -> ClassSummary:
    lat = _latencies(records)
    return ClassSummary(
        requests=len(records),
        attainment=_fraction(sum(r.slo_met for r in records), len(records)),
        ttft_p50_s=percentile(lat.ttft, 50),
        ttft_p99_s=percentile(lat.ttft, 99),
        tpot_p50_s=percentile(lat.tpot, 50),
        e2e_p50_s=percentile(lat.e2e, 50),
    )


def tpot_attainment_admitted(finished: list[RequestRecord]) -> float:
    """Share of finished requests with a TPOT target whose mean TPOT met it (1.0 if none)."""
    targeted = [r for r in finished if r.tpot_target_s is not None]
    if not targeted:
        return 1.0
    ok = sum(
        r.tpot_s is not None and r.tpot_target_s is not None and r.tpot_s <= r.tpot_target_s + 1e-9
        for r in targeted
    )
    return ok / len(targeted)


def load_imbalance(instances: list[InstanceStats]) -> float:
    """Population std-dev of last_finish_s over instances that finished something (0.0 if < 2)."""
    finishes = [i.last_finish_s for i in instances if i.last_finish_s is not None]
    if len(finishes) < 2:
        return 0.0
    return float(np.std(np.asarray(finishes, dtype=float), ddof=0))


def summarize(run: RunResult) -> StackSummary:
    """Aggregate `run` into a StackSummary (see the module docstring for the conventions)."""
    records = run.records
    duration = run.end_s - run.start_s
    finished = [r for r in records if r.finished]
    met = sum(r.slo_met for r in records)

    by_class_records: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_class_records.setdefault(r.class_name, []).append(r)
    by_class = {name: _class_summary(by_class_records[name]) for name in sorted(by_class_records)}

    lat = _latencies(records)
    demand, served = tenant_service(records)
    by_tenant: dict[str, list[RequestRecord]] = {}
    by_band: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_tenant.setdefault(r.tenant, []).append(r)
        by_band.setdefault(band_name(r.criticality), []).append(r)
    answered: dict[str, float] = {}
    for r in records:
        if r.rejected and r.rejected_s is not None:
            b = band_name(r.criticality)
            answered[b] = max(answered.get(b, 0.0), r.rejected_s - r.arrival_s)
    n_inst = len(run.instances)
    busy = sum(i.busy_s for i in run.instances)
    return StackSummary(
        stack=run.stack,
        slo_attainment=_fraction(met, len(records)),
        attainment_by_class={name: cs.attainment for name, cs in by_class.items()},
        tpot_attainment_admitted=tpot_attainment_admitted(finished),
        goodput_rps=_rate(met, duration),
        throughput_rps=_rate(len(finished), duration),
        throughput_tok_s=_rate(sum(r.output_tokens for r in finished), duration),
        ttft_p50_s=percentile(lat.ttft, 50),
        ttft_p90_s=percentile(lat.ttft, 90),
        ttft_p99_s=percentile(lat.ttft, 99),
        tpot_p50_s=percentile(lat.tpot, 50),
        tpot_p90_s=percentile(lat.tpot, 90),
        tpot_p99_s=percentile(lat.tpot, 99),
        e2e_p50_s=percentile(lat.e2e, 50),
        e2e_p90_s=percentile(lat.e2e, 90),
        e2e_p99_s=percentile(lat.e2e, 99),
        rejected=sum(r.rejected for r in records),
        unfinished=sum(not r.finished and not r.rejected for r in records),
        requests=len(records),
        evictions=sum(i.evictions for i in run.instances),
        swaps=sum(i.swaps for i in run.instances),
        gpu_busy=busy / (n_inst * duration) if n_inst > 0 and duration > 0 else 0.0,
        kv_occupancy_mean=(
            sum(i.kv_occupancy_mean for i in run.instances) / n_inst if n_inst > 0 else 0.0
        ),
        load_imbalance_s=load_imbalance(run.instances),
        wall_s=run.wall_s,
        duration_s=duration,
        by_class=by_class,
        prefix_hit_rate=_fraction(
            sum(i.prefix_hit_tokens for i in run.instances),
            sum(i.prefix_prompt_tokens for i in run.instances),
        ),
        jain_index=jain_of_service(demand, served),
        attainment_by_tenant={
            t: _fraction(sum(r.slo_met for r in rs), len(rs)) for t, rs in sorted(by_tenant.items())
        },
        attainment_by_band={
            b: _fraction(sum(r.slo_met for r in rs), len(rs)) for b, rs in sorted(by_band.items())
        },
        rejected_by_band={b: sum(r.rejected for r in rs) for b, rs in sorted(by_band.items())},
        reject_answer_max_s_by_band=dict(sorted(answered.items())),
    )


def band_name(criticality: int) -> str:
    """The band of a criticality: critical (> 0), standard (0) or sheddable (< 0)."""
    if criticality > 0:
        return "critical"
    return "standard" if criticality == 0 else "sheddable"
