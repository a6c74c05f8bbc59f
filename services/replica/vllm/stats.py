"""The latest scheduler snapshot vLLM reports (running/waiting requests, KV usage).

vLLM's engine core attaches `SchedulerStats` to each batch of outputs when stats are on; AsyncLLM
hands them to its stat loggers. `LatestSchedulerStats` is a stat-logger factory that just keeps
the newest snapshot. The snapshot is only refreshed while the engine steps: an abort of the last
request, for example, is not followed by a new one. Imports vLLM (imported by VLLMEngine only).

A custom stat logger turns all of vLLM's front-end statistics on: per-request timing stats and
an `IterationStats` updated for every output of every engine step, and a Prometheus logger that
observes histograms per token, in the process the control plane shares the cores with. The
replica reads none of them (nothing exports the replica process's Prometheus registry), so
`scheduler_stats_only` turns them off again and keeps the engine core's scheduler stats flowing
to this logger (the engine core was started with stats on, and attaches them to every batch
of outputs): what `vllm serve --disable-log-stats` pays, plus the snapshot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from vllm.config import VllmConfig
from vllm.v1.metrics.loggers import PrometheusStatLogger, StatLoggerBase
from vllm.v1.metrics.stats import IterationStats, LoRARequestStates, SchedulerStats


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


def scheduler_stats_only(llm: Any) -> bool:
    """Turn off an AsyncLLM's front-end statistics but the scheduler stats its custom loggers
    get (module docstring). The output handler fixes the setting when it starts (AsyncLLM
    starts it when built on a running event loop): one already started with no request yet is
    restarted (it waits on the engine core's output queue; a cancelled wait takes nothing from
    it). With requests already added nothing is changed: False."""
    handler = getattr(llm, "output_handler", None)
    if handler is not None and (handler.done() or llm.output_processor.request_states):
        return False
    if handler is not None:
        handler.cancel()
        llm.output_handler = None
    llm.log_stats = False  # the output handler builds no IterationStats
    processor = llm.output_processor
    processor.log_stats = False  # no per-request stats
    processor.lora_states = LoRARequestStates(False)
    manager = llm.logger_manager
    if manager is not None:
        manager.stat_loggers = [
            s for s in manager.stat_loggers if not isinstance(s, PrometheusStatLogger)
        ]
    if handler is not None:
        llm._run_output_handler()
    return True
