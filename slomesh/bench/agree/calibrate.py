"""The live mesh's calibrated profile for the simulated side of `bench-agree`.

The published profile was measured with one vLLM engine alone; on the live mesh every token
also pays the control plane's CPU (the replicas' vLLM front ends, the relay, the ingress, the
scheduler) on the same cores, and every request the hops before its engine sees it. On a small
host that cost grows with the rate offered: the requests that arrive take the engines' cores,
so a decode step measured on a light trace is too quick at load (a trace at 13/s ran out of
time on every FCFS stack while the simulator, calibrated at 8/s, served it all).

So before each stack's measured trace, a short calibration trace runs at each of
`--calibrate-rate`'s rates (the same classes, seeds of their own: no prompt the measured trace
sends) on that stack's own mesh (the mesh's CPU per admitted request shares the engines' cores,
so stacks that admit differently leave their engines different speeds), and its profile is
calibrated on what they delivered as
`bench-goodput` calibrates its simulator, with its code: the decode step becomes the plane
fitted on every rate's served requests (TPOT against the batch they streamed in and the rate
offered, slomesh/bench/goodput/delivered_fit.py), prefill is scaled by the plane's lone step,
and the live median TTFT of the lowest rate left over becomes the submit overhead
(slomesh/bench/goodput/sim.py `calibrate`); the plane is then read at the measured trace's rate
(`at_rate`). The rate term is the run-wide offered rate: while a backlog drains after the last
arrival the live steps are quicker than that plane says.

Where a calibration trace runs at the measured trace's own rate, the plane is fitted on it alone
when its streams ran in two or more batch sizes (the other rates' traces still warm the mesh up
and set the submit overhead). The step is read
at that rate anyway, and the lower rate's trace, the first after the mesh starts, was the one
that strayed: over five stack runs on this host the trace at the measured rate streamed within
3% of the measured trace's time per token at a batch of 2, the lower rate's up to 21% off (the
mesh still warming up, another moment of the shared host's load), and with the rate term
clipped at 0 the plane through both took the stray half into the step.

One difference from `bench-goodput`: each group of the plane is its streams' time per token
(`statistic="per-token"`), not their median TPOT. A trace near capacity is decided by the
tokens the engines stream per second, and the host's stalls (its other tenants, Ray, the
control plane) are part of that: a median drops them, and a simulator on the median's step
served backlogs the live mesh did not (per-token steps were 2-10% slower than the medians at a
batch of 2 on this host).

The ingress's delivered-latency guard reads the live mesh's time where the simulator cannot:
its TTFT samples span the hops after the ingress (the submit overhead, `hops_s` of the simulated
ingress) and it counts its event loop's current delay as time each request already spent. That
delay (`loop_delay`) is read from the guard's rejections of the calibration trace at the
measured rate (each names the delay it counted): their median, 0 with none. It is the delay at
the moments the guard said no, so it errs high where the delay comes in bursts.

The cluster simulator has no submit overhead of its own (only the lone-engine replay has), so
`shift_in` / `shift_out` carry it: each request reaches the simulated scheduler that much after
it was sent, and its record is then dated from when it was sent (its TTFT includes the hops).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from services.ingress.core.delivered import loop_delay_of
from shared.domain import HardwareProfile, Request
from shared.metrics.records import RequestRecord
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import DecodeLine, fit_decode_line
from slomesh.bench.goodput.sim import at_rate, calibrate


def offered(records: Sequence[RequestRecord]) -> list[Offered]:
    """The live client's records as the goodput calibration reads them (served or rejected)."""
    out = []
    for r in records:
        ttft, tpot = r.ttft_s, r.tpot_s
        served = not r.rejected and ttft is not None and tpot is not None
        out.append(
            Offered(
                arrival_s=r.arrival_s,
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                outcome="served" if served else "rejected",
                ttft_s=ttft if served and ttft is not None else 0.0,
                tpot_s=tpot if served and tpot is not None else 0.0,
            )
        )
    return out


def calibrated(
    profile: HardwareProfile,
    by_rate: Mapping[float, Sequence[RequestRecord]],
    replicas: int,
    max_num_seqs: int,
    rate_rps: float,
) -> HardwareProfile:
    """`profile` calibrated on the calibration traces' records (`by_rate`: offered rate ->
    records), read at `rate_rps` (module docstring)."""
    rates = {rate: offered(records) for rate, records in by_rate.items()}
    line = _line(rates, replicas, rate_rps)
    low = min(rates)
    cal = calibrate(profile, rates[low], replicas, max_num_seqs, line, low)
    here = at_rate(cal, line, rate_rps)
    return replace(here, source=f"{here.source}, read at {rate_rps:g} requests/s")


def decode_line(
    by_rate: Mapping[float, Sequence[RequestRecord]], replicas: int, rate_rps: float
) -> DecodeLine | None:
    """The decode plane `calibrated` reads its step from (module docstring)."""
    return _line({rate: offered(r) for rate, r in by_rate.items()}, replicas, rate_rps)


def _line(
    rates: Mapping[float, Sequence[Offered]], replicas: int, rate_rps: float
) -> DecodeLine | None:
    line = None
    if rate_rps in rates:  # the trace at the measured rate alone, if it ran two batches
        line = fit_decode_line({rate_rps: rates[rate_rps]}, replicas, "per-token")
    if line is None:
        line = fit_decode_line(rates, replicas, "per-token")
    return line


def loop_delay(by_rate: Mapping[float, Sequence[RequestRecord]], rate_rps: float) -> float:
    """The ingress loop's delay for the simulated guard, seconds (module docstring): the median
    named by the guard's rejections of the calibration trace at `rate_rps` (all traces' when
    none ran at it); 0 without any."""
    traces = [by_rate[rate_rps]] if rate_rps in by_rate else list(by_rate.values())
    named = [loop_delay_of(r.reject_reason) for t in traces for r in t if r.rejected]
    delays = [d for d in named if d is not None]
    return statistics.median(delays) if delays else 0.0


def shift_in(requests: Sequence[Request], overhead_s: float) -> list[Request]:
    """Each request as the simulated scheduler sees it: `overhead_s` after it was sent."""
    if overhead_s <= 0:
        return list(requests)
    return [replace(r, arrival_s=r.arrival_s + overhead_s) for r in requests]


def shift_out(records: Sequence[RequestRecord], overhead_s: float) -> list[RequestRecord]:
    """Records dated from when each request was sent (the inverse of `shift_in`'s arrival)."""
    if overhead_s <= 0:
        return list(records)
    return [replace(r, arrival_s=r.arrival_s - overhead_s) for r in records]
