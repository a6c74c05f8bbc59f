"""The model host's line follows the engine's queue order: arrival order, or with a deadline
ordered (EDF) queue the earliest TTFT deadline first, as the simulated engine's waiting queue
(a tight request placed behind a loose one of another model does not wait for its swap)."""

from __future__ import annotations

import asyncio

import pytest

from services.replica.model_host import ModelHost
from shared.domain.engine import EngineStatus


class Loader:
    async def load(self, model: str) -> str:
        await asyncio.sleep(0)
        return model

    async def unload(self, model: str, serving: str) -> None:
        await asyncio.sleep(0)

    def status(self, serving: str) -> EngineStatus:
        return EngineStatus(serving, 0, 1, 0, 0, 0, 0, 0)


async def serve(
    host: ModelHost[str], model: str, deadline_s: float, log: list[str], go: asyncio.Event
) -> None:
    async with host.use(model, deadline_s):
        log.append(f"{model}{deadline_s:g}")
        await go.wait()


# placed behind a running A request (deadline 0), in this order: (model, TTFT deadline)
PLACED = [("B", 300.0), ("A", 20.0), ("B", 300.0), ("A", 60.0)]


@pytest.mark.parametrize(
    ("deadline_ordered", "swaps", "starts"),
    [
        # arrival order: the first B blocks the A requests behind it, every change of model swaps
        (False, ["B", "A", "B", "A"], ["A0", "B300", "A20", "B300", "A60"]),
        # deadline order: the A requests are due first and run with the active model at once;
        # one swap serves both B requests
        (True, ["B"], ["A0", "A20", "A60", "B300", "B300"]),
    ],
)
def test_line_order_follows_the_engine_queue(
    deadline_ordered: bool, swaps: list[str], starts: list[str]
) -> None:
    async def main() -> tuple[list[str], list[str]]:
        host = ModelHost(["A", "B"], Loader(), deadline_ordered=deadline_ordered)
        log: list[str] = []
        hold, free = asyncio.Event(), asyncio.Event()
        free.set()
        first = asyncio.create_task(serve(host, "A", 0.0, log, hold))
        await asyncio.sleep(0.01)
        tasks = [asyncio.create_task(serve(host, m, d, log, free)) for m, d in PLACED]
        await asyncio.sleep(0.01)
        hold.set()
        await asyncio.gather(first, *tasks)
        return [s.to_model for s in host.swaps], log

    assert asyncio.run(main()) == (swaps, starts)
