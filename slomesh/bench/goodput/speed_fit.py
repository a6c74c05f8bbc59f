"""How the live host's speed moved over a ladder: the measured series `slomesh/sim/host_speed.py`
draws simulated hosts from.

Each served request streamed its tokens at its own TPOT, while the fitted decode line
(`delivered_fit.py`) gives the step at the batch it streamed in and the rate offered. Their ratio
is how slow the host ran over that stream. The rate's time is cut in bins of `bin_s`; a bin's
factor is the mean ratio of the streams running in it, each weighted by how long it ran there
(None: no stream ran). The bins of every rate of the ladder, one after another, are the
measured series (a gap of one None between rates: no block of the draw spans two rates).

A bin's factor averages its streams' ratios in one of two ways (`weight`), to match the line it
multiplies: `"time"` (the ladder's, whose line is a median of TPOTs) weighs each ratio by the
time its stream ran in the bin; `"tokens"` (for a line fitted per token, streaming time over
tokens: bench-agree's) takes the time the bin's streams ran over the time the line gives the
tokens they streamed there, Σ overlap / Σ overlap / ratio, so the line times the factors
streams as many tokens as the live mesh did (a mean of ratios would count the slow streams'
stalls, already in a per-token line, a second time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import DecodeLine, stream_batches
from slomesh.sim.host_speed import HostSpeed, resample


class HostSpeedFit(BaseModel):
    """How the simulated ladder draws its hosts from the live one's speed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    bin_s: float = Field(0.25, gt=0)
    """Seconds per measured factor (shorter than a stream at capacity, so that a stream
    spans several bins)."""
    block_s: float = Field(1.0, gt=0)
    """Seconds of consecutive measured factors drawn at once (about as long as the live
    mesh's slow spells, so that a drawn host keeps them)."""
    seeds: int = Field(5, ge=1)
    """Simulated hosts per rate (seeds 0..seeds-1); the simulated goodput is their median."""


def speed_series(
    offered: Sequence[Offered],
    line: DecodeLine,
    engines: int,
    rate_rps: float,
    bin_s: float,
    weight: Literal["time", "tokens"] = "time",
) -> list[float | None]:
    """One rate's factors per bin (module docstring, `weight` there), from time 0 on."""
    served = [r for r in offered if r.outcome == "served" and r.output_tokens > 1 and r.tpot_s > 0]
    if not served:
        return []
    spans = []
    for r, batch in zip(served, stream_batches(served, engines), strict=True):
        begin = r.arrival_s + r.ttft_s
        step = line.step_s(batch, rate_rps)
        if step > 0:
            spans.append((begin, begin + r.tpot_s * (r.output_tokens - 1), r.tpot_s / step))
    if not spans:
        return []
    n = int(max(end for _, end, _ in spans) / bin_s) + 1
    num, den = [0.0] * n, [0.0] * n
    for begin, end, ratio in spans:
        for k in range(int(begin / bin_s), min(n, int(end / bin_s) + 1)):
            overlap = min(end, (k + 1) * bin_s) - max(begin, k * bin_s)
            if overlap > 0:
                num[k] += overlap * ratio if weight == "time" else overlap
                den[k] += overlap if weight == "time" else overlap / ratio
    out = [num[k] / den[k] if den[k] > 0 else None for k in range(n)]
    while out and out[-1] is None:  # a stream ending on a bin's edge
        out.pop()
    return out


def ladder_series(
    rates: Mapping[float, Sequence[Offered]], line: DecodeLine, engines: int, bin_s: float
) -> list[float | None]:
    """Every rate's series, one after another, a None between them."""
    out: list[float | None] = []
    for rate, offered in rates.items():
        out += [*speed_series(offered, line, engines, rate, bin_s), None]
    return out


def hosts(series: Sequence[float | None], horizon_s: float, fit: HostSpeedFit) -> list[HostSpeed]:
    """`fit.seeds` simulated hosts covering `horizon_s`, drawn from `series`."""
    return [resample(series, fit.bin_s, fit.block_s, horizon_s, seed) for seed in range(fit.seeds)]


def describe(series: Sequence[float | None], fit: HostSpeedFit) -> str:
    """The series in words for the page: its spread and how it is drawn."""
    got = sorted(f for f in series if f is not None)
    if not got:
        return "host speed: constant (nothing measured)"

    def q(p: float) -> float:
        return got[min(len(got) - 1, int(p * len(got)))]

    return (
        f"host speed: step x{q(0.1):.2f} (p10) / x{q(0.5):.2f} (p50) / x{q(0.9):.2f} (p90) of "
        f"the fitted line over {len(got) * fit.bin_s:.0f} s of streams, drawn in "
        f"{fit.block_s:g} s blocks, median of {fit.seeds} seeds"
    )
