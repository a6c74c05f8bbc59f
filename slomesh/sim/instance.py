"""A simulated serving instance: the engine core plus the bookkeeping the event loop needs."""

from __future__ import annotations

from typing import Protocol

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepPlan
from services.replica.core.planner_factory import make_planner
from services.replica.core.sequence import SeqStatus
from services.scheduler.core.cluster_view import WorkItem
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig, EngineStatus, RequestTooLarge, SliceEntry


class InstanceHost(Protocol):
    """What an instance calls back into (the Simulator, slomesh/sim/simulator.py, which imports
    this module: instances see it only through this interface)."""

    def kick(self, inst: SimInstance, now_s: float) -> None: ...

    def reject(self, request: Request, reason: str, now_s: float) -> None: ...

    def record_placement(self, request_id: str, instance: str) -> None: ...


class SimInstance:
    """Implements services.scheduler.core.cluster_view.InstanceHandle over a SimEngineCore."""

    def __init__(
        self,
        name: str,
        gpu: str,
        profiles: dict[str, HardwareProfile],
        config: EngineConfig,
        active_model: str,
        sim: InstanceHost,
    ) -> None:
        self._name = name
        self._gpu = gpu
        self.core = SimEngineCore(
            name, profiles, config, make_planner(config, profiles), active_model
        )
        self.sim = sim
        self.in_flight: StepPlan | None = None
        self.schedule_pending = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def gpu(self) -> str:
        return self._gpu

    def serves(self, model: str) -> bool:
        return model in self.core.tiers.profiles

    def profile(self, model: str) -> HardwareProfile:
        return self.core.tiers.profiles[model]

    def status(self) -> EngineStatus:
        return self.core.status()

    def work_items(self) -> list[WorkItem]:
        return [
            WorkItem(
                ttft_deadline_abs_s=s.request.ttft_deadline_abs_s,
                running=s.status is SeqStatus.RUNNING,
                prefill_tokens=s.uncomputed_tokens,
                context_tokens=s.num_tokens,
                remaining_output_tokens=s.remaining_output_tokens,
            )
            for s in self.core.sequences()
        ]

    @property
    def token_budget(self) -> int:
        return self.core.config.max_num_batched_tokens

    @property
    def max_num_seqs(self) -> int:
        return self.core.config.max_num_seqs

    def load_time_s(self, model: str) -> float:
        return self.core.tiers.load_time_s(model)

    def prewarm(self, model: str) -> None:
        self.core.tiers.prewarm(model)

    def submit(self, request: Request, now_s: float) -> None:
        try:
            self.core.add_request(request, now_s)
        except RequestTooLarge as e:
            self.sim.reject(request, str(e), now_s)
            return
        self.sim.record_placement(request.request_id, self._name)
        self.sim.kick(self, now_s)

    def evict(self, request_ids: list[str], now_s: float) -> list[str]:
        done = self.core.evict(request_ids)
        self.sim.kick(self, now_s)
        return done

    def resume(self, request_ids: list[str], now_s: float) -> list[str]:
        done = self.core.resume(request_ids, now_s)
        self.sim.kick(self, now_s)
        return done

    def submit_batch(self, entries: list[SliceEntry], iterations: int, now_s: float) -> None:
        """Queue a pre-formed batch for one slice (static engines: SCLS, UELLM)."""
        fitting = []
        for e in entries:
            try:
                self.core.check_fits(e.request)
            except RequestTooLarge as err:
                self.sim.reject(e.request, str(err), now_s)
                continue
            fitting.append(e)
            self.sim.record_placement(e.request.request_id, self._name)
        if fitting:
            self.core.add_batch(fitting, iterations, now_s)
        self.sim.kick(self, now_s)
