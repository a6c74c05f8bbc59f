"""A vLLM replica keeps the engine core's scheduler stats and turns vLLM's front-end statistics
off (services/replica/vllm/stats.py `scheduler_stats_only`): no IterationStats, no per-request
stats, no Prometheus logger; an output handler already started with nothing added is
restarted, and one with requests is left alone."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from vllm.v1.metrics.loggers import PrometheusStatLogger

from services.replica.vllm.stats import scheduler_stats_only


class _LLM:
    """The AsyncLLM attributes scheduler_stats_only touches."""

    def __init__(self, requests: dict[str, Any] | None = None) -> None:
        self.log_stats = True
        self.output_processor = SimpleNamespace(
            log_stats=True, lora_states=None, request_states=requests or {}
        )
        self.ours = object()
        self.prometheus = PrometheusStatLogger.__new__(PrometheusStatLogger)
        self.logger_manager = SimpleNamespace(stat_loggers=[self.ours, self.prometheus])
        self.output_handler: asyncio.Task[None] | None = None
        self.started = 0
        self.started_with_stats: list[bool] = []

    def _run_output_handler(self) -> None:
        self.started += 1
        self.started_with_stats.append(self.log_stats)
        self.output_handler = asyncio.get_running_loop().create_task(asyncio.sleep(3600))


def _off(llm: _LLM) -> bool:
    return not (
        llm.log_stats
        or llm.output_processor.log_stats
        or llm.output_processor.lora_states.log_stats
    )


def test_before_the_output_handler_starts() -> None:
    llm = _LLM()
    assert scheduler_stats_only(llm) is True
    assert _off(llm) and llm.logger_manager.stat_loggers == [llm.ours]
    assert llm.started == 0  # it starts at the first request, with the stats off


def test_a_started_handler_with_nothing_added_is_restarted_with_the_stats_off() -> None:
    async def run() -> tuple[bool, _LLM, asyncio.Task[None]]:
        llm = _LLM()
        llm._run_output_handler()  # AsyncLLM built on a running loop
        old = llm.output_handler
        assert old is not None
        done = scheduler_stats_only(llm)
        await asyncio.sleep(0)
        return done, llm, old

    done, llm, old = asyncio.run(run())
    assert done is True and old.cancelled()
    assert llm.started_with_stats == [True, False] and _off(llm)
    assert llm.logger_manager.stat_loggers == [llm.ours]


def test_a_handler_with_requests_is_left_alone() -> None:
    async def run() -> tuple[bool, _LLM]:
        llm = _LLM(requests={"r": object()})
        llm._run_output_handler()
        done = scheduler_stats_only(llm)
        assert llm.output_handler is not None
        llm.output_handler.cancel()
        return done, llm

    done, llm = asyncio.run(run())
    assert done is False and llm.started == 1 and llm.log_stats
    assert llm.logger_manager.stat_loggers == [llm.ours, llm.prometheus]
