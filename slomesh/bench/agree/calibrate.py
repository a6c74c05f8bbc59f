"""The live mesh's calibrated profile for the simulated side of `bench-agree`.

The published profile was measured with one vLLM engine alone; on the live mesh every token
also pays the control plane's CPU (the replicas' vLLM front ends, the relay, the ingress, the
scheduler) on the same cores, and every request the hops before its engine sees it. So before
the first stack's measured trace, a short calibration trace (the same classes, its own seed: no
prompt the measured trace sends; at `--calibrate-rate`, which may be the trace's own rate, so the
control plane's cost at that load shows) runs on that stack's mesh, and the profile is
calibrated on what it delivered exactly as `bench-goodput` calibrates its simulator
(slomesh/bench/goodput/sim.py `calibrate`): step times scaled by the live median TPOT over the
simulated one, the live median TTFT left over becomes the profile's submit overhead.

The cluster simulator has no submit overhead of its own (only the lone-engine replay has), so
`shift_in` / `shift_out` carry it: each request reaches the simulated scheduler that much after
it was sent, and its record is then dated from when it was sent (its TTFT includes the hops).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from shared.domain import HardwareProfile, Request
from shared.metrics.records import RequestRecord
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.sim import calibrate


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
    records: Sequence[RequestRecord],
    replicas: int,
    max_num_seqs: int,
) -> HardwareProfile:
    """`profile` calibrated on the live calibration trace's records (module docstring)."""
    return calibrate(profile, offered(records), replicas, max_num_seqs)


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
