"""The model host: requests of the active model run together, another model waits until they
finish, swaps follow the line's order, and a failed load fails only its own waiters."""

from __future__ import annotations

import asyncio

import pytest

from services.replica.model_host import ModelHost, ModelNotServed, SwapFailed
from shared.domain.engine import EngineStatus


class FakeLoader:
    """Records loads and unloads; a model in `broken` fails to load."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        self.events: list[str] = []
        self.broken = broken
        self.gate: asyncio.Event | None = None

    async def load(self, model: str) -> str:
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if model in self.broken:
            self.events.append(f"fail {model}")
            raise RuntimeError(f"no weights for {model}")
        self.events.append(f"load {model}")
        return model

    async def unload(self, model: str, serving: str) -> None:
        self.events.append(f"unload {model}")

    def status(self, serving: str) -> EngineStatus:
        return EngineStatus(serving, 0, 1, 0, 0, 0, 0, 0)


async def serve(host: ModelHost[str], model: str, log: list[str], release: asyncio.Event) -> str:
    async with host.use(model) as serving:
        log.append(f"start {model} on {serving}")
        await release.wait()
        log.append(f"end {model}")
        return serving


def run(coro):
    return asyncio.run(coro)


def test_active_model_requests_share_the_engine_without_a_swap():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        log: list[str] = []
        go = asyncio.Event()
        tasks = [asyncio.create_task(serve(host, "A", log, go)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert log == ["start A on A"] * 3  # all three run at once
        go.set()
        assert await asyncio.gather(*tasks) == ["A"] * 3
        return loader.events, host.swaps

    events, swaps = run(main())
    assert events == ["load A"]
    assert swaps == []


def test_other_model_waits_for_running_requests_then_swaps():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        log: list[str] = []
        release_a, release_b = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(serve(host, "A", log, release_a))
        await asyncio.sleep(0.01)
        b = asyncio.create_task(serve(host, "B", log, release_b))
        await asyncio.sleep(0.01)
        assert log == ["start A on A"]  # B waits: A still runs
        assert host.status().waiting == 1
        release_a.set()
        await a
        await asyncio.sleep(0.01)
        assert log[-1] == "start B on B"
        assert host.active == "B"
        release_b.set()
        await b
        return loader.events, host

    events, host = run(main())
    assert events == ["load A", "unload A", "load B"]  # A's request ended before the unload
    assert [(s.from_model, s.to_model, s.ok) for s in host.swaps] == [("A", "B", True)]
    assert host.swaps[0].seconds >= 0 and host.swaps[0].started_unix_s > 0


def test_head_of_line_for_another_model_holds_back_later_requests_of_the_active_one():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        log: list[str] = []
        go = asyncio.Event()
        first = asyncio.create_task(serve(host, "A", log, go))
        await asyncio.sleep(0.01)
        waiting = [asyncio.create_task(serve(host, m, log, go)) for m in ("B", "A")]
        await asyncio.sleep(0.01)
        assert log == ["start A on A"]  # the later A request queues behind B
        go.set()
        await asyncio.gather(first, *waiting)
        return log, loader.events

    log, events = run(main())
    starts = [x for x in log if x.startswith("start")]
    assert starts == ["start A on A", "start B on B", "start A on A"]
    assert events == ["load A", "unload A", "load B", "unload B", "load A"]


def test_failed_load_puts_the_old_model_back_and_fails_only_its_waiters():
    async def main():
        loader = FakeLoader(broken=frozenset({"C"}))
        host = ModelHost(["A", "C"], loader)
        log: list[str] = []
        go = asyncio.Event()
        go.set()
        await host.start()
        with pytest.raises(SwapFailed, match="'C' failed to load: no weights for C"):
            await serve(host, "C", log, go)
        served = await serve(host, "A", log, go)
        return served, host, loader.events

    served, host, events = run(main())
    assert served == "A"
    assert host.active == "A"
    assert host.failed_requests == 1
    assert [(s.to_model, s.ok) for s in host.swaps] == [("C", False)]
    assert events == ["load A", "unload A", "fail C", "load A"]


def test_model_not_listed_is_refused_naming_the_valid_ones():
    async def main():
        host = ModelHost(["A", "B"], FakeLoader())
        async with host.use("Z"):
            pass

    with pytest.raises(ModelNotServed, match=r"'Z' is not served by this replica \(valid: A, B\)"):
        run(main())


def test_a_waiter_cancelled_before_its_turn_leaves_the_line():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        log: list[str] = []
        go = asyncio.Event()
        a = asyncio.create_task(serve(host, "A", log, go))
        await asyncio.sleep(0.01)
        b = asyncio.create_task(serve(host, "B", log, go))
        await asyncio.sleep(0.01)
        b.cancel()
        await asyncio.sleep(0.01)
        assert host.status().waiting == 0
        go.set()
        await a
        later = await serve(host, "A", log, go)  # no swap was left pending for B
        return later, loader.events

    later, events = run(main())
    assert later == "A"
    assert events == ["load A"]


def test_status_reports_the_model_a_running_swap_loads():
    """As the simulated engine does: the model being loaded is the one a request placed now is
    served on next, and `swapping` says nothing runs until it is ready."""

    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        await host.start()
        loader.gate = asyncio.Event()
        go = asyncio.Event()
        go.set()
        b = asyncio.create_task(serve(host, "B", [], go))
        await asyncio.sleep(0.01)
        during = host.status()
        assert await host.start() is None  # a caller during the swap loads nothing again
        loader.gate.set()
        await b
        return during, host.status(), loader.events

    during, after, events = run(main())
    assert events == ["load A", "unload A", "load B"]
    # while B loads, B is the model a request placed now is served on next
    assert (during.active_model, during.swapping) == ("B", True)
    assert (during.waiting, during.running) == (1, 0)
    assert (after.active_model, after.swapping, after.waiting) == ("B", False, 0)


def test_a_swap_order_waits_until_no_request_of_the_active_model_runs():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B"], loader)
        log: list[str] = []
        release_a, release_late = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(serve(host, "A", log, release_a))
        await asyncio.sleep(0.01)
        host.swap_to("B")  # the scheduler's decision, no request of B yet
        assert host.target == "B" and host.active == "A"
        assert host.status().waiting == 0  # an order is no waiting request
        late = asyncio.create_task(serve(host, "A", log, release_late))
        await asyncio.sleep(0.01)
        assert log == ["start A on A", "start A on A"]  # the later A request runs first
        release_a.set()
        await a
        await asyncio.sleep(0.01)
        assert host.swaps == [] and host.active == "A"  # the later one still runs
        release_late.set()
        await late
        await asyncio.sleep(0.01)
        return loader.events, log, host

    events, log, host = run(main())
    assert [s.to_model for s in host.swaps] == ["B"]  # swapped with nothing of B waiting
    assert events == ["load A", "unload A", "load B"]  # no swap back for the later request
    assert log == ["start A on A", "start A on A", "end A", "end A"]  # nothing was lost
    assert host.failed_requests == 0


def test_an_order_back_to_the_active_model_cancels_one_not_carried_out():
    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B", "C"], loader)
        release = asyncio.Event()
        a = asyncio.create_task(serve(host, "A", [], release))
        await asyncio.sleep(0.01)
        host.swap_to("B")
        host.swap_to("A")  # the scheduler changed its mind before the swap began
        assert host.target == "A"
        host.swap_to("C")
        host.swap_to("B")  # a later order replaces the earlier one
        assert host.target == "B"
        release.set()
        await a
        await asyncio.sleep(0.01)
        return loader.events, host

    events, host = run(main())
    assert events == ["load A", "unload A", "load B"]
    assert [(s.from_model, s.to_model) for s in host.swaps] == [("A", "B")]


def test_a_swap_order_to_the_model_the_line_ends_on_is_nothing_to_do():
    async def main():
        host = ModelHost(["A", "B"], FakeLoader())
        await host.start()
        host.swap_to("A")
        assert host.target == "A" and not host.swapping and host.swaps == []
        with pytest.raises(ModelNotServed, match="valid: A, B"):
            host.swap_to("C")

    run(main())


def test_a_third_models_head_goes_before_an_ordered_swap_which_still_stands():
    """Loading the ordered model while the line's head wants another would serve nothing:
    the head blocks every request behind it."""

    async def main():
        loader = FakeLoader()
        host = ModelHost(["A", "B", "C"], loader)
        log: list[str] = []
        release_a, release_c = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(serve(host, "A", log, release_a))
        await asyncio.sleep(0.01)
        host.swap_to("B")
        c = asyncio.create_task(serve(host, "C", log, release_c))
        await asyncio.sleep(0.01)
        release_a.set()
        await a
        await asyncio.sleep(0.01)
        assert host.active == "C" and host.target == "B"  # C's request runs, B still ordered
        release_c.set()
        await c
        await asyncio.sleep(0.01)
        return loader.events, log, host

    events, log, host = run(main())
    assert events == ["load A", "unload A", "load C", "unload C", "load B"]
    assert log == ["start A on A", "end A", "start C on C", "end C"]
    assert host.active == "B" and host.failed_requests == 0
