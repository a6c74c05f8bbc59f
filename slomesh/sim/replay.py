"""Replay a trace on a lone simulated engine, on virtual time; per-request TTFT, TPOT and E2E.

The engine is one SimEngineCore with the given profile and an EngineConfig that mirrors the real
engine's (max_num_seqs, max_num_batched_tokens, block size; KV capacity comes from the profile),
driven by slomesh/sim/lone_engine.py. Like vLLM's engine loop, requests that arrive while a step
runs join at the step's end; an idle engine jumps to the next arrival. Output lengths are forced
(true_output_tokens).

The serving front end's costs that the profile carries (submit_overhead_s, delivery_overhead_s,
measured by slomesh/profiling/serving_fit.py) are added: the engine sees a request
submit_overhead_s after its arrival, and the caller sees each token delivery_overhead_s after
the step that made it. Latencies count from the arrival.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from slomesh.sim.lone_engine import LoneEngine
from slomesh.sim.trace import TraceRequest, to_requests


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """One replayed request: latencies in seconds from its arrival (submission).

    tpot_s is the mean inter-token time after the first token: (e2e - ttft) / (n - 1), 0 for n=1.
    """

    request_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    ttft_s: float
    e2e_s: float

    @property
    def tpot_s(self) -> float:
        n = self.output_tokens
        return (self.e2e_s - self.ttft_s) / (n - 1) if n > 1 else 0.0


def sim_engine_config(
    max_num_seqs: int, max_num_batched_tokens: int, block_size_tokens: int
) -> EngineConfig:
    """A continuous-batching FCFS engine with the real engine's limits."""
    return EngineConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        block_size_tokens=block_size_tokens,
    )


def replay_sim(
    trace: Sequence[TraceRequest], profile: HardwareProfile, config: EngineConfig
) -> list[RequestTiming]:
    """Run `trace` to completion on a SimEngineCore; timings in trace order."""
    engine = LoneEngine("replay", profile, config)
    submit, deliver = profile.submit_overhead_s, profile.delivery_overhead_s
    shifted = [replace(t, arrival_s=t.arrival_s + submit) for t in trace]
    seqs = engine.run(to_requests(shifted, profile.model))
    by_id = {}
    for s in seqs:
        r = s.request
        assert s.first_token_s is not None and s.finish_s is not None
        arrival = r.arrival_s - submit
        by_id[r.request_id] = RequestTiming(
            r.request_id,
            arrival,
            r.input_tokens,
            s.num_output_tokens,
            s.first_token_s + deliver - arrival,
            s.finish_s + deliver - arrival,
        )
    return [by_id[t.request_id] for t in trace]
