"""A swap's end is pushed to the scheduler at once: the model host calls `on_swap_end` once per
swap (loaded or failed) when its state names the model it ended on, and the replica's pusher
sends that state once whether or not a push interval is set."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.replica.model_host import ModelHost, SwapFailed
from services.replica.state_push import StatePushArgs, StatePusher
from shared.domain.engine import EngineStatus
from shared.rpc.slomesh.v1 import common_pb2


class FakeLoader:
    """Loads at once; a model in `broken` fails to load."""

    def __init__(self, broken: frozenset[str]) -> None:
        self.broken = broken

    async def load(self, model: str) -> str:
        await asyncio.sleep(0)
        if model in self.broken:
            raise RuntimeError(f"no weights for {model}")
        return model

    async def unload(self, model: str, serving: str) -> None:
        return None

    def status(self, serving: str) -> EngineStatus:
        return EngineStatus(serving, 0, 1, 0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("broken", "ended_on"),
    [
        (frozenset(), "B"),  # loaded: the state names B, no swap running
        (frozenset({"B"}), "A"),  # failed: A was put back
    ],
)
def test_the_host_reports_each_swaps_end_with_the_state_it_ended_on(
    broken: frozenset[str], ended_on: str
) -> None:
    async def main() -> list[tuple[str, bool]]:
        host = ModelHost(["A", "B"], FakeLoader(broken))
        seen: list[tuple[str, bool]] = []
        host.on_swap_end = lambda: seen.append(
            (str(host.status().active_model), host.status().swapping)
        )
        await host.start()
        assert seen == []  # the first load is no swap
        try:
            async with host.use("B"):
                pass
        except SwapFailed:
            pass
        return seen

    assert asyncio.run(main()) == [(ended_on, False)]


class Calls:
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def call(self, app: str, kind: str, method: str, msg: Any, timeout_s: float) -> None:
        self.methods.append(method)


@pytest.mark.parametrize(
    ("args", "pushes"),
    [
        (StatePushArgs(), 1),  # no interval: the swap's end is pushed all the same
        (StatePushArgs(interval_ms=60_000), 1),
        (StatePushArgs(on_swap_end=False), 0),
    ],
)
def test_push_soon_sends_the_state_once(args: StatePushArgs, pushes: int) -> None:
    async def main() -> list[str]:
        pusher = StatePusher(args, common_pb2.ReplicaState)
        calls = Calls()
        pusher._client = calls  # type: ignore[assignment]
        pusher.push_soon()
        await asyncio.sleep(0.01)
        assert pusher._task is None  # no interval loop started by it
        return calls.methods

    assert asyncio.run(main()) == ["UpdateReplica"] * pushes
