"""Capacity at SLO: the highest arrival rate at which a stack's SLO attainment stays >= a target.

The search is pure: it only calls `probe(rate) -> attainment` and compares with the target.

1. Bracket. Without a given bracket, probe the scenario's default rate; if it attains the target,
   double until a probe misses, else halve until one attains (at most `max_steps` doublings or
   halvings). Never attained gives capacity 0 (no low end); always attained gives the highest
   rate probed (no high end). A given bracket (lo, hi) must bracket: lo attains and hi misses,
   else `BracketError` (a ValueError: one line, exit code 2 in the CLI).
2. Bisect at the midpoint until hi / lo - 1 <= `rel_tol` (5% by default: about 5 probes after a
   doubling bracket). The capacity is the final low end, the highest rate seen attaining.

Attainment is not strictly monotone in the rate for one seed (the sampled lengths and arrivals
change with it), so the answer is the rate bisection lands on, one per seed; `slomesh bench
--capacity` reports the median over seeds. How probes are made fast (fewer requests per probe,
early stop, two worker processes) is in `slomesh/bench/capacity_run.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

Probe = Callable[[float], float]


class BracketError(ValueError):
    """A given bracket does not bracket the target (lo misses it or hi attains it)."""


class CapacitySettings(BaseModel):
    """How `slomesh bench --capacity` searches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: float = Field(default=0.9, gt=0.0, le=1.0)
    """SLO attainment the capacity must keep, in (0, 1]."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Workload seeds, each searched on its own; the capacity is their median."""
    rel_tol: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Bisection stops when hi / lo - 1 <= rel_tol."""
    max_steps: int = Field(default=8, ge=1, le=30)
    """At most this many doublings or halvings while bracketing."""
    bracket: tuple[float, float] | None = None
    """A given (lo, hi) in requests/s instead of bracketing from the default rate."""
    probe_requests: int | None = Field(default=None, ge=1)
    """Requests per probe (None: min(scenario requests, PROBE_REQUESTS))."""
    every_class: bool = True
    """Also search the every-class capacity (each SLO class >= target), beside the overall one."""
    workers: int = Field(default=2, ge=1, le=2)
    """Worker processes over (stack, seed) pairs (this machine has 2 cores)."""

    @field_validator("seeds")
    @classmethod
    def _seeds_non_negative(cls, v: list[int]) -> list[int]:
        if any(s < 0 for s in v):
            raise ValueError(f"seeds must be >= 0, got {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct, got {v}")
        return v

    @field_validator("bracket")
    @classmethod
    def _bracket_ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not 0.0 < v[0] < v[1] < float("inf"):
            raise ValueError(f"bracket must be 0 < lo < hi (finite requests/s), got {v}")
        return v


@dataclass(frozen=True, slots=True)
class CapacitySearch:
    """One search's answer: capacity (r/s), the final bracket, and every probe in order."""

    capacity_rps: float
    lo_rps: float | None
    """Highest rate seen attaining (None: none did)."""
    hi_rps: float | None
    """Lowest rate seen missing above lo (None: none did)."""
    probes: tuple[tuple[float, float], ...]
    """(rate, attainment) per probe; an early-stopped probe's attainment is a bound."""

    @property
    def iterations(self) -> int:
        return len(self.probes)

    def to_dict(self) -> dict[str, object]:
        return {
            "capacity_rps": self.capacity_rps,
            "bracket_rps": [self.lo_rps, self.hi_rps],
            "iterations": self.iterations,
            "probes": [[r, a] for r, a in self.probes],
        }


def search_capacity(
    probe: Probe,
    start_rps: float,
    target: float,
    *,
    rel_tol: float = 0.05,
    max_steps: int = 8,
    bracket: tuple[float, float] | None = None,
) -> CapacitySearch:
    """Bracket, then bisect, the highest rate with probe(rate) >= target (see module doc)."""
    if not start_rps > 0:
        raise ValueError(f"start rate must be > 0 requests/s, got {start_rps}")
    probes: list[tuple[float, float]] = []

    def ok(rate: float) -> bool:
        att = probe(rate)
        probes.append((rate, att))
        return att >= target

    lo: float | None
    hi: float | None
    if bracket is not None:
        lo, hi = bracket
        if not ok(lo):
            raise BracketError(
                f"bracket: the low rate {lo:g} r/s must attain the target {target:g} "
                f"(attained {probes[-1][1]:.3f})"
            )
        if ok(hi):
            raise BracketError(
                f"bracket: the high rate {hi:g} r/s must miss the target {target:g} "
                f"(attained {probes[-1][1]:.3f})"
            )
    else:
        lo, hi = _bracket(ok, start_rps, max_steps)
        if lo is None or hi is None:
            return CapacitySearch(lo or 0.0, lo, hi, tuple(probes))
    while hi / lo - 1.0 > rel_tol:
        mid = (lo + hi) / 2.0
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return CapacitySearch(lo, lo, hi, tuple(probes))


def _bracket(
    ok: Callable[[float], bool], start: float, max_steps: int
) -> tuple[float | None, float | None]:
    rate = start
    if ok(rate):
        for _ in range(max_steps):
            if not ok(rate * 2.0):
                return rate, rate * 2.0
            rate *= 2.0
        return rate, None
    for _ in range(max_steps):
        if ok(rate / 2.0):
            return rate / 2.0, rate
        rate /= 2.0
    return None, rate
