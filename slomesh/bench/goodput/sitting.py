"""What carries the simulator's calibration from one sitting to another.

A calibration (sim.py's `calibrate`, the decode plane of `delivered_fit.py`, the host-speed
series of `speed_fit.py`) is what the live mesh delivered in the sitting it was taken in. In
another sitting the same code on the same machine runs its engine at another speed: the host's
other load (other sessions' processes, which the mesh's CPU priority does not rank below it),
its caches and clocks differ. What does not differ is how much the mesh's control plane slows
its engine below a bare engine's speed on the same host at the same load. So bench-goodput
measures the host in every sitting with the baseline (bare vLLM, the same engine and ladder):
the ratio of its decode step between the two sittings, over the rates both ran, is how much
slower this sitting's host is, and the calibration's decode plane is scaled by it
(`host_scale`). The measured host-speed series keeps its shape: it is relative to the plane.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from slomesh.bench.goodput.delivered_fit import DecodeLine

BASELINE = "bare-vllm"
"""The system whose decode step measures the host in each sitting."""


def baseline_tpot(data: Mapping[str, Any], baseline: str = BASELINE) -> dict[float, float]:
    """The baseline's median TPOT (ms) per rate of a goodput.json, rates it served."""
    return {
        float(s["rate_rps"]): float(s["tpot_p50_ms"])
        for entry in data.get("systems", [])
        if entry.get("name") == baseline
        for s in entry.get("steps", [])
        if s.get("served") and s.get("tpot_p50_ms")
    }


MIN_CALIBRATION_RATES = 2
"""Rates a sitting must have run to calibrate another's simulation: the decode step's lone
part, its part per request in the batch and the submit overhead are told apart only across
loads (`calibration_problem`)."""


def calibration_problem(data: Mapping[str, Any]) -> str | None:
    """Why a goodput.json cannot calibrate another sitting's simulation, None when it can. With
    one rate, near capacity, every stream runs in about the same batch (the decode line's lone
    step and per-request part are not told apart, and the line is extrapolated to every other
    batch) and the lowest rate's first tokens wait in a queue, which `calibrate` takes for
    submit overhead and adds to every simulated request."""
    rates = sorted({float(r) for r in data.get("plan", {}).get("rates", [])})
    if len(rates) >= MIN_CALIBRATION_RATES:
        return None
    ran = ", ".join(f"{r:g}" for r in rates) or "none"
    return (
        f"a calibration sitting needs a ladder of at least {MIN_CALIBRATION_RATES} rates, one "
        f"below capacity (this one ran {ran} r/s): with one rate the decode step's parts and "
        "the submit overhead are not told apart"
    )


def host_scale(now: Mapping[float, float], then: Mapping[float, float]) -> float | None:
    """How much slower this sitting's host decodes than the calibration sitting's: the
    geometric mean, over the rates both sittings ran, of the baseline's TPOT now over then
    (`baseline_tpot`); None without a common rate."""
    ratios = [now[r] / then[r] for r in now.keys() & then.keys() if now[r] > 0 and then[r] > 0]
    if not ratios:
        return None
    return math.exp(math.fsum(math.log(x) for x in ratios) / len(ratios))


def scaled_line(line: DecodeLine, scale: float) -> DecodeLine:
    """`line` with every step `scale` times as long."""
    return DecodeLine(
        line.intercept_s * scale,
        line.per_request_s * scale,
        line.points,
        line.per_offered_s * scale,
    )


def describe(scale: float | None, rates: Sequence[float]) -> str:
    """The scale in words for the page."""
    if scale is None:
        return f"host not rescaled ({BASELINE} ran at no common rate in both sittings)"
    where = ", ".join(f"{r:g}" for r in sorted(rates))
    return f"decode step x{scale:.3f} for this sitting's host ({BASELINE}'s TPOT at {where} r/s)"
