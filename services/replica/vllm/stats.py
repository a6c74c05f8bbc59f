"""The latest scheduler snapshot vLLM reports (running/waiting requests, KV usage).

vLLM's engine core attaches `SchedulerStats` to each batch of outputs when stats are on; AsyncLLM
hands them to its stat loggers. `LatestSchedulerStats` is a stat-logger factory that just keeps
the newest snapshot. The snapshot is only refreshed while the engine steps: an abort of the last
request, for example, is not followed by a new one. Imports vLLM (imported by VLLMEngine only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from vllm.config import VllmConfig
from vllm.v1.metrics.loggers import StatLoggerBase
from vllm.v1.metrics.stats import IterationStats, SchedulerStats


@dataclass(frozen=True, slots=True)
class SchedulerSnapshot:
    """One SchedulerStats, reduced to what slomesh reads. wall_s: when it was recorded."""

    running: int
    waiting: int
    kv_cache_usage: float
    wall_s: float


class LatestSchedulerStats:
    """Keeps the newest scheduler snapshot; pass the instance itself as a stat-logger factory."""

    def __init__(self) -> None:
        self.latest: SchedulerSnapshot | None = None

    def __call__(self, vllm_config: VllmConfig, engine_index: int = 0) -> StatLoggerBase:
        return _Recorder(self)


class _Recorder(StatLoggerBase):
    def __init__(self, sink: LatestSchedulerStats) -> None:
        self._sink = sink

    def record(
        self,
        scheduler_stats: SchedulerStats | None,
        iteration_stats: IterationStats | None,
        mm_cache_stats: Any = None,
        engine_idx: int = 0,
    ) -> None:
        if scheduler_stats is not None:
            self._sink.latest = SchedulerSnapshot(
                running=scheduler_stats.num_running_reqs,
                waiting=scheduler_stats.num_waiting_reqs + scheduler_stats.num_skipped_waiting_reqs,
                kv_cache_usage=scheduler_stats.kv_cache_usage,
                wall_s=time.time(),
            )

    def log_engine_initialized(self) -> None:
        pass
