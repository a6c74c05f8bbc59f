"""`bench-mesh --compare` measures each system's fixed cost: the CPU its processes spend
outside the engine while no request comes, between the warm-up and the probes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from slomesh.bench.compare import load
from slomesh.bench.compare import run as compare_run
from slomesh.bench.compare.cpu import CpuSplit
from slomesh.bench.compare.load import StreamTiming
from slomesh.bench.compare.stats import SystemResult
from slomesh.bench.compare.systems import Running, SystemSpec


class _Client:
    async def close(self) -> None:
        pass


def _patched(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> None:
    readings = iter([1.0, 1.5, 10.0, 16.0])  # outside-engine CPU seconds, in sampling order

    def tree_cpu(pid: int) -> CpuSplit:
        events.append("cpu")
        return CpuSplit(0.0, next(readings), {})

    async def sequential(client: Any, model: str, max_tokens: int, n: int) -> list[StreamTiming]:
        events.append(f"sequential {max_tokens}x{n}")
        return [StreamTiming(0.01, 0.02, max_tokens)] * n

    async def concurrent(
        client: Any, model: str, max_tokens: int, workers: int, seconds: float
    ) -> tuple[int, int, int, float]:
        events.append("c8")
        return (30, 960, 0, seconds)

    async def sleep(seconds: float) -> None:
        events.append(f"idle {seconds:g}")

    monkeypatch.setattr(compare_run, "tree_cpu", tree_cpu)
    monkeypatch.setattr(load, "client_for", lambda url: _Client())
    monkeypatch.setattr(load, "sequential", sequential)
    monkeypatch.setattr(load, "concurrent", concurrent)
    monkeypatch.setattr("asyncio.sleep", sleep)


def _measure(plan: compare_run.Plan) -> SystemResult:
    spec = SystemSpec("slomesh", 1, ["x"], "http://127.0.0.1:1/v1", "m")
    running = Running(spec, type("P", (), {"pid": 1})(), 1.0, None)  # type: ignore[arg-type]
    result = SystemResult("slomesh", 1)
    asyncio.run(compare_run.measure(spec, running, plan, result))
    return result


def test_idle_cpu_is_sampled_after_the_warm_up_and_before_the_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    _patched(monkeypatch, events)
    result = _measure(compare_run.Plan(idle_seconds=5.0, sweep_max_tokens=(1,), c8_seconds=2.0))
    assert events[:4] == ["sequential 16x10", "cpu", "idle 5", "cpu"]
    assert events[4:6] == ["sequential 1x100", "sequential 16x40"]
    assert result.idle_cpu_outside_engine_s == pytest.approx(0.5)
    assert result.idle_seconds >= 0.0
    assert result.cpu_outside_engine_s == pytest.approx(6.0)  # the c8 run's own samples
    assert result.c8_requests == 30


def test_no_idle_phase_when_its_seconds_are_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    _patched(monkeypatch, events)
    result = _measure(compare_run.Plan(idle_seconds=0.0, sweep_max_tokens=(1,), c8_seconds=2.0))
    assert not any(e.startswith("idle") for e in events)
    assert result.idle_cpu_outside_engine_s is None
    assert result.cpu_outside_engine_s == pytest.approx(0.5)
