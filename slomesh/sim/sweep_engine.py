"""The simulated engine (SimEngineCore) behind the sweep's `SweepEngine` interface.

Runs on virtual time: a step takes exactly the duration its HardwareProfile gives (see
slomesh/sim/engine_check.py). Used to profile the simulated engine (the fit must give back the
profile it runs) and to compute the ideal throughput of the ε run (inefficiency.py).
"""

from __future__ import annotations

from services.profiler.core.runner import StepObservation
from services.profiler.core.sweep import EngineLimits
from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepKind
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.engine import EngineConfig

_NO_DEADLINE = SLO(ttft_deadline_s=1e12)


class SimSweepEngine:
    """A lone SimEngineCore serving `profile.model`, stepped on a virtual clock."""

    def __init__(self, profile: HardwareProfile, config: EngineConfig) -> None:
        self.profile = profile
        self.config = config
        self.core = SimEngineCore("profiler-sim", {profile.model: profile}, config, profile.model)
        self._now_s = 0.0

    @property
    def limits(self) -> EngineLimits:
        """The engine's limits (KV capacity in whole blocks, as the block pool holds it)."""
        bs = self.config.block_size_tokens
        return EngineLimits(
            max_num_seqs=self.config.max_num_seqs,
            max_num_batched_tokens=self.config.max_num_batched_tokens,
            kv_capacity_tokens=self.profile.kv_capacity_tokens // bs * bs,
            max_model_len=self.profile.kv_capacity_tokens // bs * bs,
            block_size_tokens=bs,
        )

    def now_s(self) -> float:
        return self._now_s

    def add(self, request_id: str, input_tokens: int, max_tokens: int) -> None:
        req = Request(
            request_id,
            self.profile.model,
            input_tokens,
            max_tokens,
            self._now_s,
            _NO_DEADLINE,
            true_output_tokens=max_tokens,
        )
        self.core.add_request(req, self._now_s)

    def step(self) -> StepObservation:
        plan = self.core.schedule(self._now_s)
        if plan.kind is StepKind.IDLE:
            raise RuntimeError("simulated engine idle with unfinished requests")
        result = self.core.update(plan)
        self._now_s = plan.end_s
        return StepObservation(emitted=len(result.emitted), finished=len(result.finished))

    def has_work(self) -> bool:
        return self.core.has_work
