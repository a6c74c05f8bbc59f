"""The goodput ladder in the simulator, with the live mesh's calibrated profile.

Calibration (`calibrate`). The published profile was measured with the engine alone; on the
live mesh each token also pays the control plane's CPU (the replica's vLLM front end, the
relay, the ingress) on the same cores, and that cost grows with the streams in flight. The
decode step becomes the plane the whole ladder's served requests delivered (TPOT against the
batch they streamed in and the rate offered, `delivered_fit.py`), prefill is scaled by the
plane's lone step over the profile's, and the live median TTFT of the lowest rate left over
after replaying it on simulated engines (admission, hops) becomes the profile's submit
overhead. Without such a plane (too few batches) the decode coefficients are scaled by the
lowest rate's live median TPOT over the simulated one, either way: a mesh that decodes faster
than the published profile (taken on a busier host) calibrates a faster simulator.

The ladder (`simulate_rate`). The same offered requests as the live run (arrival times, prompt
and output lengths from vLLM's result) arrive on `engines` simulated engines
(`slomesh.sim.lone_engine.LoneEngine`, the replicas' max_num_seqs), each let in or rejected by
the ingress's own admission (`services.ingress.core.delivered.DeliveredGuard`, one per ingress
replica, requests dealt to them in turn) fed with the simulated first tokens and ends, and
placed on the engine with the fewest unfinished requests, which it reaches the calibrated
submit overhead after its arrival. The engines run on a host whose speed varies as the live
one's did (`speed`: slomesh/sim/host_speed.py, drawn from the ladder's measured speed by
`speed_fit.py`; None: a constant host). Goodput counts the requests whose
TTFT and TPOT are within the objectives, per second from the first arrival to the last answer,
as vLLM's benchmark does.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.profile import DecodeCoeffs, PrefillCoeffs
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import DecodeLine
from slomesh.sim.host_speed import HostSpeed
from slomesh.sim.lone_engine import EngineStalled, LoneEngine
from slomesh.sim.replay import replay_sim, sim_engine_config
from slomesh.sim.trace import TraceRequest


@dataclass(frozen=True)
class SimStep:
    rate_rps: float
    offered: int
    served: int
    rejected: int
    met: int
    goodput_rps: float


def _scaled(
    profile: HardwareProfile,
    k: float,
    submit_s: float,
    line: DecodeLine | None = None,
    rate_rps: float = 0.0,
) -> HardwareProfile:
    d, p = profile.decode, profile.prefill
    decode = DecodeCoeffs(d.d1 * k, d.d2 * k, d.d3 * k, d.d4 * k)
    how = f"x{k:.2f}, +{submit_s:.3f} s"
    if line is not None:
        decode = DecodeCoeffs(0.0, line.per_request_s, 0.0, line.step_s(0.0, rate_rps))
        how = (
            f"decode step {line.intercept_s * 1e3:.2f} ms + {line.per_request_s * 1e3:.3f} ms "
            f"per request in the batch + {line.per_offered_s * 1e3:.4f} ms per request/s "
            f"offered, fitted on {line.points} served requests; prefill x{k:.2f}; "
            f"+{submit_s:.3f} s"
        )
    return replace(
        profile,
        decode=decode,
        prefill=PrefillCoeffs(p.p1 * k, p.p2 * k, p.p3 * k, p.p4 * k, p.p5 * k),
        submit_overhead_s=submit_s,
        source=f"{profile.source}; calibrated on the live mesh ({how})",
    )


def at_rate(
    calibrated: HardwareProfile, line: DecodeLine | None, rate_rps: float
) -> HardwareProfile:
    """The calibrated profile's decode step at `rate_rps` offered (unchanged without a line)."""
    if line is None:
        return calibrated
    d = calibrated.decode
    return replace(calibrated, decode=DecodeCoeffs(d.d1, d.d2, d.d3, line.step_s(0.0, rate_rps)))


def _sim_times(
    profile: HardwareProfile, served: Sequence[Offered], engines: int, max_num_seqs: int
) -> tuple[list[float], list[float]]:
    """Simulated (TTFTs, TPOTs) of `served`, dealt to the engines in turn."""
    config = sim_engine_config(max_num_seqs, 8192, 16)
    sim_tpot, sim_ttft = [], []
    for e in range(max(1, engines)):
        trace = [
            TraceRequest(f"c{i}", r.arrival_s, r.input_tokens, r.output_tokens)
            for i, r in enumerate(served)
            if i % engines == e
        ]
        if trace:
            timings = replay_sim(trace, profile, config)
            sim_tpot += [t.tpot_s for t in timings]
            sim_ttft += [t.ttft_s for t in timings]
    return sim_ttft, sim_tpot


def calibrate(
    profile: HardwareProfile,
    offered: Sequence[Offered],
    engines: int,
    max_num_seqs: int,
    line: DecodeLine | None = None,
    rate_rps: float = 0.0,
) -> HardwareProfile:
    """The profile scaled to what the live mesh delivered at `rate_rps` (module doc; `offered`
    are that rate's requests); with `line`, its decode step is the plane fitted on the whole
    ladder (`delivered_fit.py`; `at_rate` moves it to another rate) and prefill is scaled by
    the plane's lone step over the profile's."""
    served = [r for r in offered if r.outcome == "served" and r.output_tokens > 1]
    if not served:
        return profile
    if line is not None:
        ctx = statistics.median(r.input_tokens + r.output_tokens / 2 for r in served)
        k = line.step_s(1, rate_rps) / profile.decode_time_s(ctx, 1)
        lone = _scaled(profile, k, 0.0, line, rate_rps)
        sim_ttft, _ = _sim_times(lone, served, engines, max_num_seqs)
        submit = max(0.0, statistics.median(r.ttft_s for r in served) - statistics.median(sim_ttft))
        return _scaled(profile, k, submit, line, rate_rps)
    sim_ttft, sim_tpot = _sim_times(profile, served, engines, max_num_seqs)
    k = statistics.median(r.tpot_s for r in served) / statistics.median(sim_tpot)
    scaled_ttft = statistics.median(sim_ttft) * k
    submit = max(0.0, statistics.median(r.ttft_s for r in served) - scaled_ttft)
    return _scaled(profile, k, submit)


def _advance(engine: LoneEngine, until_s: float) -> None:
    """Run `engine`'s steps that start before `until_s`; an idle engine waits until then."""
    while engine.now_s < until_s:
        try:
            engine.step()
        except EngineStalled:
            engine.now_s = until_s


def simulate_rate(
    rate: float,
    offered: Sequence[Offered],
    profile: HardwareProfile,
    engines: int,
    max_num_seqs: int,
    slo_ttft_s: float,
    slo_tpot_s: float,
    guard: DeliveredGuardConfig | None,
    ingress_replicas: int = 1,
    speed: HostSpeed | None = None,
) -> SimStep:
    """One rate of the ladder (module docstring); `guard` None admits everything; `speed`
    scales every engine's steps (one host for all of them)."""
    config = sim_engine_config(max_num_seqs, 8192, 16)
    pool = [LoneEngine(f"e{i}", profile, config, speed) for i in range(max(1, engines))]
    guards = [DeliveredGuard(guard) for _ in range(max(1, ingress_replicas))] if guard else []
    owner: dict[str, DeliveredGuard] = {}
    seqs = []
    on_way = {e.core.name: 0 for e in pool}
    """Requests placed on each engine that have not reached it yet (a placement counts them
    with the unfinished requests it holds)."""
    open_: list[Any] = []
    """Admitted sequences whose end the guards have not been fed yet."""
    fed_first: set[str] = set()
    fed_end: set[str] = set()
    deliver = profile.delivery_overhead_s
    slo = SLO(slo_ttft_s, slo_tpot_s, class_name="custom")

    def feed(now_s: float) -> None:
        for s in [s for s in open_ if s.request.request_id not in fed_end]:
            rid = s.request.request_id
            g = owner[rid]
            if s.first_token_s is not None and rid not in fed_first:
                fed_first.add(rid)
                g.first_token(rid, min(now_s, s.first_token_s + deliver))
            if s.finish_s is not None:
                fed_end.add(rid)
                g.end(rid, s.num_output_tokens, min(now_s, s.finish_s + deliver))
        open_[:] = [s for s in open_ if s.request.request_id not in fed_end]

    due: list[tuple[float, int, LoneEngine, Request]] = []
    """Admitted requests on their way to their engine (they reach it the submit overhead
    after their arrival), soonest first."""

    def run_until(t_s: float) -> None:
        """Every engine's steps that start before `t_s`, each request joining its engine when
        it reaches it."""
        while due and due[0][0] <= t_s:
            at_s, _, engine, request = heapq.heappop(due)
            on_way[engine.core.name] -= 1
            for e in pool:
                _advance(e, at_s)
            seq = engine.add(request)
            seqs.append(seq)
            if guards:
                open_.append(seq)
        for e in pool:
            _advance(e, t_s)

    rejected = 0
    ordered = sorted(offered, key=lambda r: r.arrival_s)
    for i, r in enumerate(ordered):
        run_until(r.arrival_s)
        rid = f"r{i}"
        if guards:
            feed(r.arrival_s)
            g = guards[i % len(guards)]
            if not g.check(profile.model, slo_ttft_s, slo_tpot_s, 0.0, r.arrival_s).admit:
                rejected += 1
                continue
            g.start(rid, profile.model, slo_ttft_s, r.arrival_s, True, r.output_tokens)
            owner[rid] = g
        engine = min(pool, key=lambda e: len(e.core.sequences()) + on_way[e.core.name])
        on_way[engine.core.name] += 1
        request = Request(
            rid,
            profile.model,
            r.input_tokens,
            r.output_tokens,
            r.arrival_s + profile.submit_overhead_s,
            slo,
            true_output_tokens=r.output_tokens,
        )
        heapq.heappush(due, (request.arrival_s, i, engine, request))
    run_until(math.inf)
    for engine in pool:
        while engine.core.has_work:
            engine.step()
    met = 0
    last = ordered[-1].arrival_s if ordered else 0.0
    for s in seqs:
        assert s.first_token_s is not None and s.finish_s is not None
        arrival = s.request.arrival_s - profile.submit_overhead_s
        ttft = s.first_token_s + deliver - arrival
        n = s.num_output_tokens
        tpot = (s.finish_s - s.first_token_s) / (n - 1) if n > 1 else 0.0
        met += ttft <= slo_ttft_s and tpot <= slo_tpot_s
        last = max(last, s.finish_s + deliver)
    duration = max(last - (ordered[0].arrival_s if ordered else 0.0), 1e-9)
    return SimStep(rate, len(ordered), len(seqs), rejected, met, met / duration)
