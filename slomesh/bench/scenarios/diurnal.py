"""A diurnal, bursty workload for the autoscaling runs (`autoscale-diurnal`).

The rate follows a day compressed into `day_s`: λ(t) = lo + (hi − lo)·(1 − cos(2πt/day))/2,
trough at the start and end, peak at mid-day (a documented synthetic curve: the Azure LLM trace
covers one hour, not a day). Within it the arrivals keep the Azure conversation trace's own
burstiness: requests are drawn at 1 request/s with arrival='trace' (the trace's inter-arrival
pattern and its real (input, output) lengths) and each arrival u is moved to t = Λ⁻¹(u), with
Λ(t) = ∫₀ᵗ λ, the time change that turns a rate-1 process into one of rate λ(t).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shared.domain import Request
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec, generate


class DiurnalSpec(BaseModel):
    """The compressed day of the autoscaling scenario."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    day_s: float = Field(3600.0, gt=0)
    """Seconds one day is compressed into."""
    trough_rps: float = Field(1.5, gt=0)
    """Arrival rate at night (requests/s)."""
    peak_rps: float = Field(15.0, gt=0)
    """Arrival rate at mid-day (requests/s)."""
    interactive_fraction: float = Field(0.7, ge=0, le=1)
    """Share of requests in the `interactive` class (TTFT 20 s); the rest are `batch-1` (60 s)."""
    model: str = "llama-3.1-8b"
    """Served model."""

    def expected_requests(self) -> int:
        """Λ(day): the mean number of arrivals over the day."""
        return int(self.cumulative(np.array([self.day_s]))[0])

    def cumulative(self, t: np.ndarray) -> np.ndarray:
        """Λ(t) = lo·t + (hi − lo)/2·(t − day/(2π)·sin(2πt/day))."""
        lo, hi, day = self.trough_rps, self.peak_rps, self.day_s
        return lo * t + (hi - lo) / 2 * (t - day / (2 * math.pi) * np.sin(2 * math.pi * t / day))

    def rate(self, t: float) -> float:
        lo, hi = self.trough_rps, self.peak_rps
        return lo + (hi - lo) * (1 - math.cos(2 * math.pi * t / self.day_s)) / 2


def diurnal_requests(spec: DiurnalSpec, seed: int) -> list[Request]:
    """The day's requests for `seed`, sorted by arrival."""
    n = spec.expected_requests()
    lengths = LengthSpec(source="azure-conv", max_input_tokens=4096, max_tokens=2048)
    share = spec.interactive_fraction
    streams = [
        StreamSpec(
            name=cls,
            slo_class=cls,
            models=[spec.model],
            rate_rps=rate,
            arrival="trace",
            trace="conv",
            lengths=lengths,
        )
        for cls, rate in (("interactive", share), ("batch-1", 1 - share))
        if rate > 0
    ]
    base = generate(WorkloadSpec(streams=streams, requests=n), seed)
    grid = np.linspace(0.0, spec.day_s, 20_001)
    lam = spec.cumulative(grid)
    out = []
    for r in base:
        if r.arrival_s > lam[-1]:
            continue
        t = float(np.interp(r.arrival_s, lam, grid))
        out.append(dataclasses.replace(r, arrival_s=t))
    return out
