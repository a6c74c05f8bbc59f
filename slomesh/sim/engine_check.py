"""Does the simulated engine reproduce its own hardware profile?

Two measurements on a lone SimEngineCore driven on virtual time (slomesh/sim/lone_engine.py):
- batch-1 decode: one request of `context` prompt tokens generating `tokens` tokens; the measured
  mean inter-token time vs the profile's mean of tau_decode(context + k, 1) over the same tokens;
- saturated throughput: `batch` identical requests arriving together; tokens/s over the steps in
  which all of them decode (no prefill in the step) vs batch / tau_decode(mean context, batch).
Both go through the engine's whole scheduling path (token budget, chunked prefill, KV blocks), so
a step-time or accounting bug there shows up as a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.replica.core.outputs import StepPlan
from services.replica.core.sequence import Sequence
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.engine import EngineConfig
from slomesh.sim.lone_engine import LoneEngine


@dataclass(frozen=True, slots=True)
class FidelityReport:
    gpu: str
    model: str
    batch1_ms_measured: float
    batch1_ms_profile: float
    batch: int
    saturated_tok_s_measured: float
    saturated_tok_s_profile: float

    @property
    def batch1_error(self) -> float:
        return abs(self.batch1_ms_measured / self.batch1_ms_profile - 1)

    @property
    def saturated_error(self) -> float:
        return abs(self.saturated_tok_s_measured / self.saturated_tok_s_profile - 1)


def _run(
    profile: HardwareProfile, n: int, context: int, tokens: int
) -> tuple[list[Sequence], list[tuple[StepPlan, int]]]:
    """Run n identical requests to completion; return them and each step with its context sum."""
    engine = LoneEngine("fidelity", profile, EngineConfig(max_num_seqs=n))
    requests = [
        Request(f"f{i}", profile.model, context, tokens, 0.0, SLO(1e9), true_output_tokens=tokens)
        for i in range(n)
    ]
    steps: list[tuple[StepPlan, int]] = []

    def observe(plan: StepPlan) -> None:
        steps.append((plan, sum(ch.seq.num_computed_tokens + 1 for ch in plan.chunks)))

    seqs = engine.run(requests, observe)
    return seqs, steps


def measure(
    profile: HardwareProfile, context: int = 1024, tokens: int = 256, batch: int | None = None
) -> FidelityReport:
    (one,), _ = _run(profile, 1, context, tokens)
    assert one.first_token_s is not None and one.finish_s is not None
    b1 = (one.finish_s - one.first_token_s) / (tokens - 1)
    b1_prof = sum(profile.decode_time_s(context + k, 1) for k in range(1, tokens)) / (tokens - 1)

    n = batch or max(1, min(256, profile.kv_capacity_tokens // (context + tokens + 16)))
    _, steps = _run(profile, n, context, tokens)
    full = [
        (p, c)
        for p, c in steps
        if len(p.chunks) == n and all(ch.num_tokens == 1 for ch in p.chunks)
    ]
    if not full:
        raise RuntimeError(f"no full-batch decode step with batch {n}")
    measured = n * len(full) / sum(p.duration_s for p, _ in full)
    mean_ctx = sum(c for _, c in full) / (n * len(full))
    predicted = n / profile.decode_time_s(mean_ctx, n)
    return FidelityReport(
        profile.gpu, profile.model, b1 * 1e3, b1_prof * 1e3, n, measured, predicted
    )
