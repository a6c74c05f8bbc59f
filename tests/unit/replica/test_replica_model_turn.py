"""A request waiting for its model sends heartbeats until the swap is done, then gets the model's
serving; a caller that leaves while it waits leaves the host's line."""

from __future__ import annotations

import asyncio
import contextlib

from services.replica.model_host import ModelHost
from services.replica.model_turn import ModelTurn
from tests.unit.replica.test_replica_model_host import FakeLoader


def test_a_request_behind_a_swap_gets_heartbeats_then_its_models_serving() -> None:
    async def main() -> tuple[int, str, list[str]]:
        loader = FakeLoader()
        host: ModelHost[str] = ModelHost(["A", "B"], loader)
        await host.start()
        loader.gate = asyncio.Event()  # the swap to B loads only once the gate opens
        beats = 0
        # the timeout only turns a missing heartbeat (the gate never opens) into a failure
        async with asyncio.timeout(30), contextlib.AsyncExitStack() as held:
            turn = ModelTurn(host, "B", held, heartbeat_s=0.01)
            async for _ in turn.wait():
                beats += 1
                loader.gate.set()  # a heartbeat came while the swap ran: let it finish
            serving = turn.serving
            assert host.status().running == 1  # the request holds its model until it ends
        return beats, serving, loader.events

    beats, serving, events = asyncio.run(main())
    assert beats >= 1 and serving == "B"
    assert events == ["load A", "unload A", "load B"]


def test_a_caller_that_leaves_while_waiting_leaves_the_line() -> None:
    async def main() -> tuple[int, list[str], ModelHost[str]]:
        host: ModelHost[str] = ModelHost(["A", "B"], FakeLoader())
        release = asyncio.Event()

        async def hold_a() -> None:
            async with host.use("A"):
                await release.wait()

        a = asyncio.create_task(hold_a())
        await asyncio.sleep(0.01)
        async with contextlib.AsyncExitStack() as held:
            waits = ModelTurn(host, "B", held, heartbeat_s=0.01).wait()
            await anext(waits)  # B waits behind the running A request
            assert host.status().waiting == 1
            await waits.aclose()  # the caller left
        waiting = host.status().waiting
        release.set()
        await a
        await asyncio.sleep(0.01)
        return waiting, [s.to_model for s in host.swaps], host

    waiting, swaps, host = asyncio.run(main())
    assert waiting == 0 and swaps == [] and host.active == "A"
