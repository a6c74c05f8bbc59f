"""Simulator runs of the smoke scenario, cached per session (each takes a fraction of a second)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shared.domain import Request
from shared.metrics.records import RunResult
from shared.workloads import generate
from slomesh.bench.scenarios import SCENARIOS, ScenarioSpec
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


def smoke_requests(
    seed: int, rate: float | None = None, requests: int | None = None
) -> list[Request]:
    workload = SCENARIOS.create("smoke").workload
    if rate is not None:
        workload = workload.with_total_rate(rate)
    if requests is not None:
        workload = workload.model_copy(update={"requests": requests})
    return generate(workload, seed)


def simulate(cluster: ClusterSpec, stack: str, requests: list[Request]) -> RunResult:
    return Simulator(cluster, STACKS.create(stack), requests).run()


def signature(run: RunResult) -> list[tuple[object, ...]]:
    """Everything a run decided about each request (not the wall time it took)."""
    return [
        (
            r.request_id,
            r.instance,
            r.first_token_s,
            r.finish_s,
            r.output_tokens,
            r.preemptions,
            r.rejected,
        )
        for r in run.records
    ]


class Sims:
    requests = staticmethod(smoke_requests)
    simulate = staticmethod(simulate)
    signature = staticmethod(signature)


@pytest.fixture(scope="session")
def smoke() -> ScenarioSpec:
    return SCENARIOS.create("smoke")


@pytest.fixture
def sims() -> type[Sims]:
    return Sims


@pytest.fixture(scope="session")
def smoke_run(smoke: ScenarioSpec) -> Callable[..., RunResult]:
    """smoke_run(stack, seed, rate=None, requests=None): one cached smoke-scenario run."""
    cache: dict[tuple[object, ...], RunResult] = {}

    def get(stack: str, seed: int, rate: float | None = None, requests: int | None = None):
        key = (stack, seed, rate, requests)
        if key not in cache:
            cache[key] = simulate(smoke.cluster, stack, smoke_requests(seed, rate, requests))
        return cache[key]

    return get
