"""The simulated engine (SimEngineCore) behind the sweep's `SweepEngine` interface.

Runs on virtual time (a LoneEngine, slomesh/sim/lone_engine.py): a step takes exactly the
duration its HardwareProfile gives (see slomesh/sim/engine_check.py). Used to profile the
simulated engine (the fit must give back the profile it runs) and to compute the ideal throughput
of the ε run (inefficiency.py).
"""

from __future__ import annotations

from services.profiler.core.runner import StepObservation
from services.profiler.core.sweep import EngineLimits
from services.replica.core.engine_core import SimEngineCore
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.engine import EngineConfig
from slomesh.sim.lone_engine import LoneEngine

_NO_DEADLINE = SLO(ttft_deadline_s=1e12)


class SimSweepEngine:
    """A lone SimEngineCore serving `profile.model`, stepped on a virtual clock."""

    def __init__(self, profile: HardwareProfile, config: EngineConfig) -> None:
        self.profile = profile
        self.config = config
        self._engine = LoneEngine("profiler-sim", profile, config)

    @property
    def core(self) -> SimEngineCore:
        """The engine core being swept (its counters: preemptions, busy time)."""
        return self._engine.core

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
        return self._engine.now_s

    def add(self, request_id: str, input_tokens: int, max_tokens: int) -> None:
        req = Request(
            request_id,
            self.profile.model,
            input_tokens,
            max_tokens,
            self._engine.now_s,
            _NO_DEADLINE,
            true_output_tokens=max_tokens,
        )
        self._engine.add(req)

    def step(self) -> StepObservation:
        result = self._engine.step()
        return StepObservation(emitted=len(result.emitted), finished=len(result.finished))

    def has_work(self) -> bool:
        return self.core.has_work
