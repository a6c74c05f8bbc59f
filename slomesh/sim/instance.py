"""A simulated serving instance: the engine core plus the bookkeeping the event loop needs.

It is what the cluster core reads (services.scheduler.core.cluster_view.InstanceView); the
core's decisions reach its engine through the simulator's applier (slomesh/sim/applier.py).
"""

from __future__ import annotations

from services.replica.core.engine_core import SimEngineCore
from services.replica.core.outputs import StepPlan
from services.replica.core.planner_factory import make_planner
from services.replica.core.sequence import SeqStatus
from services.scheduler.core.cluster_view import PendingChange, RequestState, WorkItem
from shared.domain import HardwareProfile
from shared.domain.engine import EngineConfig, EngineStatus
from slomesh.sim.host_speed import HostSpeed

_STATES: dict[SeqStatus, RequestState] = {
    SeqStatus.WAITING: "waiting",
    SeqStatus.RUNNING: "running",
    SeqStatus.EVICTED: "evicted",
    SeqStatus.BATCHED: "batched",
}


class SimInstance:
    """Implements services.scheduler.core.cluster_view.InstanceView over a SimEngineCore."""

    def __init__(
        self,
        name: str,
        gpu: str,
        profiles: dict[str, HardwareProfile],
        config: EngineConfig,
        active_model: str,
    ) -> None:
        self._name = name
        self._gpu = gpu
        self.core = SimEngineCore(
            name, profiles, config, make_planner(config, profiles), active_model
        )
        self.in_flight: StepPlan | None = None
        self.schedule_pending = False
        self.speed: HostSpeed | None = None
        """The host's speed over time (host_speed.py; None: the profile's throughout)."""

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

    def status_after(self, change: PendingChange) -> EngineStatus:
        """Placed and resumed requests join the waiting queue; evicted ones leave theirs."""
        st = self.core.status()
        return EngineStatus(
            active_model=st.active_model,
            waiting=st.waiting + change.added - change.evicted_waiting,
            running=st.running - change.evicted_running,
            evicted=st.evicted + change.evicted_waiting + change.evicted_running - change.resumed,
            kv_used_blocks=st.kv_used_blocks,
            kv_total_blocks=st.kv_total_blocks,
            outstanding_output_tokens=st.outstanding_output_tokens + change.output_tokens,
            pending_prefill_tokens=st.pending_prefill_tokens + change.prefill_tokens,
            waiting_prefill=st.waiting_prefill,
            deadline_ordered=st.deadline_ordered,
            loaded_adapters=st.loaded_adapters,
            swapping=st.swapping,
        )

    def holds(self, request_id: str) -> RequestState | None:
        seq = self.core.sequence(request_id)
        if seq is None:
            return None
        if seq.status in (SeqStatus.WAITING, SeqStatus.RUNNING) and seq.is_done:
            return "done"  # generated in full: a static batch holds it until the batch ends
        return _STATES.get(seq.status)

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
