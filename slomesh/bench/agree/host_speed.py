"""The live host's speed over a measured trace, for the simulator to replay
(slomesh/sim/host_speed.py).

A calibration trace, run before the measured one, gives the engines' step as a function of the
batch (the decode plane, slomesh/bench/goodput/delivered_fit.py). On a shared two-core host the
speed then drifts, between the calibration and the trace and within the trace: the time per
token streamed moves from second to second (another tenant's burst can double it for seconds),
and a trace near capacity is decided by those stalls, which a constant step cannot show.

The series is bench-goodput's (slomesh/bench/goodput/speed_fit.py `speed_series`: per window,
the time the streams ran there over the time the plane gives the tokens they streamed, its
`"tokens"` weight, as the plane is fitted per token), read on the measured trace's own records
with their times moved onto the simulator's clock, and replayed as it was (`measured`): the
simulator replays the same trace, so each window's factor applies at its own time. A window
nothing streamed in runs at the plane's speed.

`calibrated_on_trace` is what bench-agree simulates each stack with: the profile `calibrated`
makes (calibrate.py) with the measured trace's own records in place of the calibration trace
at its rate, so the plane is the speed the engines ran the trace at (the calibration traces
still set prefill's scale, the submit overhead and the guard's loop delay, and warm the mesh
up), and the host's speed over the trace against that plane. The calibration traces' own step
is kept in the profile's source beside the trace's: their difference is the drift the
calibration alone would have simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from shared.domain import HardwareProfile
from shared.metrics.records import RequestRecord
from slomesh.bench.agree.calibrate import calibrated, decode_line, offered
from slomesh.bench.goodput.delivered_fit import DecodeLine
from slomesh.bench.goodput.speed_fit import speed_series
from slomesh.sim.host_speed import HostSpeed, measured


def measured_speed(
    records: Sequence[RequestRecord],
    line: DecodeLine,
    engines: int,
    rate_rps: float,
    window_s: float,
    start_s: float,
) -> HostSpeed:
    """The host's step-time factor per `window_s` over `records` (module docstring), read
    against `line` at `rate_rps` offered, the trace's first arrival at `start_s` on the
    simulator's clock."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    if not records:
        return HostSpeed(window_s, ())
    t0 = min(r.arrival_s for r in records)
    moved = [replace(o, arrival_s=o.arrival_s - t0 + start_s) for o in offered(records)]
    series = speed_series(moved, line, engines, rate_rps, window_s, weight="tokens")
    return measured(series, window_s)


def calibrated_on_trace(
    profile: HardwareProfile,
    calibration: Mapping[float, Sequence[RequestRecord]],
    trace: Sequence[RequestRecord],
    replicas: int,
    max_num_seqs: int,
    rate_rps: float,
    window_s: float,
    first_arrival_s: float,
) -> tuple[HardwareProfile, HostSpeed | None]:
    """(profile, host speed) to simulate the measured `trace` with (module docstring);
    `first_arrival_s`: the trace's first arrival on the simulator's clock before the submit
    overhead; `window_s` 0: no host speed (None)."""
    by_rate = {**calibration, rate_rps: trace}
    prof = calibrated(profile, by_rate, replicas, max_num_seqs, rate_rps)
    line = decode_line(by_rate, replicas, rate_rps)
    if line is None:
        return prof, None
    before = decode_line(calibration, replicas, rate_rps) if calibration else None
    b = float(max_num_seqs)
    how = f"the step fitted on the measured trace ({line.step_s(b, rate_rps) * 1e3:.3f} ms"
    if before is not None:
        how += f"; the calibration traces': {before.step_s(b, rate_rps) * 1e3:.3f} ms"
    how += f", at a batch of {max_num_seqs})"
    speed = None
    if window_s > 0:
        start = first_arrival_s + prof.submit_overhead_s
        speed = measured_speed(trace, line, replicas, rate_rps, window_s, start)
        if speed.factors:
            how += (
                f"; the host's speed replayed per {window_s:g} s (step x"
                f"{min(speed.factors):.2f}-{max(speed.factors):.2f})"
            )
    return replace(prof, source=f"{prof.source}; {how}"), speed
