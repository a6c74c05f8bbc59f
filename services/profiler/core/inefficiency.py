"""ε, the continuous-batching inefficiency (QLM Eqs. 4 and 15; shared/README.md).

QLM: "if GPU memory was not a constraint, the decode steps would not be interrupted" and the
work would take its ideal time; ε >= 1 is the measured slowdown against that ideal. Here:
- measured: the sweep's ε runs (mixed prompt and output lengths, all arriving together, run
  a few times) on the real engine: output tokens / the median run's wall seconds;
- ideal: the same requests on the simulated engine with the *fitted* coefficients, the same
  batch limits (max_num_seqs, step token budget, block size) and a KV cache large enough that
  nothing is ever preempted: output tokens / virtual seconds.
ε = ideal / measured, floored at 1 (shared.profiles.fit_inefficiency). The raw ratio is
reported too: below 1 means the fitted step model is pessimistic for mixed steps.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.profiler.core.runner import MixedRunMeasurement, SweepEngine
from services.profiler.core.sweep import EngineLimits, MixedRequest
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig
from shared.profiles import fit_inefficiency

IdealEngineFactory = Callable[[HardwareProfile, EngineConfig], SweepEngine]
"""Builds the ideal engine: the simulated engine with a profile's step times and a config's batch
limits, on a virtual clock. The composition root hands it in (slomesh/sim/lone_engine.py)."""


@dataclass(frozen=True, slots=True)
class InefficiencyReport:
    """ε and the throughputs it came from."""

    measured_tok_s: float
    ideal_tok_s: float
    ratio: float
    """ideal / measured, unfloored."""
    epsilon: float
    """max(1, ratio)."""
    requests: int
    output_tokens: int
    measured_s: float
    ideal_s: float
    measured_runs_s: tuple[float, ...] = ()
    """Wall seconds of every ε run (measured_s is their median)."""


def ideal_run_s(
    profile: HardwareProfile,
    requests: Sequence[MixedRequest],
    limits: EngineLimits,
    ideal_engine: IdealEngineFactory,
) -> tuple[float, int]:
    """Virtual seconds and output tokens of `requests` (arriving together) on the simulated
    engine with `profile`'s step times, `limits`' batch limits and unlimited KV."""
    bs = limits.block_size_tokens
    need_tokens = sum(math.ceil((r.input_tokens + r.output_tokens) / bs) * bs for r in requests)
    roomy = dataclasses.replace(
        profile,
        kv_capacity_bytes=(need_tokens + bs) * profile.kv_bytes_per_token,
        inefficiency=1.0,
    )
    config = EngineConfig(
        max_num_seqs=limits.max_num_seqs,
        max_num_batched_tokens=limits.max_num_batched_tokens,
        block_size_tokens=bs,
    )
    engine = ideal_engine(roomy, config)
    for i, r in enumerate(requests):
        engine.add(f"ideal-{i}", r.input_tokens, r.output_tokens)
    tokens = 0
    while engine.has_work():
        tokens += engine.step().emitted
    return engine.now_s(), tokens


def measure_inefficiency(
    fitted: HardwareProfile,
    requests: Sequence[MixedRequest],
    measured: MixedRunMeasurement,
    limits: EngineLimits,
    ideal_engine: IdealEngineFactory,
) -> InefficiencyReport:
    """ε of the measured ε run against the fitted profile's ideal (module docstring)."""
    if measured.wall_s <= 0 or measured.output_tokens <= 0:
        raise ValueError(
            f"ε run measured {measured.output_tokens} tokens in {measured.wall_s} s: "
            "nothing to compare"
        )
    ideal_s, ideal_tokens = ideal_run_s(fitted, requests, limits, ideal_engine)
    measured_tok_s = measured.output_tokens / measured.wall_s
    ideal_tok_s = ideal_tokens / ideal_s
    return InefficiencyReport(
        measured_tok_s=measured_tok_s,
        ideal_tok_s=ideal_tok_s,
        ratio=ideal_tok_s / measured_tok_s,
        epsilon=fit_inefficiency(measured_tok_s, ideal_tok_s),
        requests=len(requests),
        output_tokens=measured.output_tokens,
        measured_s=measured.wall_s,
        ideal_s=ideal_s,
        measured_runs_s=measured.runs_s,
    )
