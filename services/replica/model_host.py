"""One engine, several models: the replica's model host (QLM's model swap, live).

A replica that lists several models (`ReplicaArgs.models`) keeps one of them active on its
engine. A request for another model of the list waits its turn in the host's line, in the order
of the engine's queue (the simulated engine's rule: its waiting queue in policy order, whose
head, when it wants another model, blocks admission): arrival order, or with a queue policy
that orders by deadline (EDF: `deadline_ordered`) the earliest TTFT deadline first, so a tight
request placed behind a loose one of another model is not held behind that model's swap. The
line's head, when it wants another model, blocks those behind it. Once every request
running on the active model has finished, the host swaps: the loader takes the active model off
the engine and makes the waiting head's model active (`model_swap.py`: an engine restart on vLLM
CPU, sleep/wake where vLLM has sleep mode, a profiled wait on the simulated engine). Then the
requests at the head of the line for that model run, and so on. Nothing accepted is dropped by a
swap: running requests finish first, waiting ones wait. A swap that fails puts the previous model
back and fails only the requests waiting for the model that could not load (counted in
`failed_requests`).

The scheduler may also order a swap (`swap_to`, its ModelSwap decision), with the simulated
engine's rule (shared/domain/swap_order.py): one order at a time, a later one replaces it and
one back to the active model cancels it; it is carried out once no request of the active model
runs (requests of the active model that come while it waits still run first) and the line is
empty or its head wants the ordered model. A head that wants a third model swaps the host to
that model first, the order still standing.

Each swap is timed (unload + load + warm-up, wall clock) and kept in `swaps`, what the replica
reports as its measured swap time. When a swap ends (loaded or failed), the host calls
`on_swap_end` once its state tells the new model (the replica pushes that state to the
scheduler at once, so its books do not count the replica swapping until the next probe).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from shared.domain.engine import EngineStatus
from shared.domain.swap_order import SwapOrder

S = TypeVar("S")


class ModelLoader(Protocol[S]):
    """Makes one model the engine's active model; `S` is what requests run on (the serving)."""

    async def load(self, model: str) -> S:
        """Start serving `model` (nothing else is loaded) and return its serving."""
        ...

    async def unload(self, model: str, serving: S) -> None:
        """Take `model` off the engine (its requests have all finished)."""
        ...

    def status(self, serving: S) -> EngineStatus:
        """The engine's state while `serving` is active."""
        ...


class ModelNotServed(ValueError):
    """A request named a model this replica does not list."""


class SwapFailed(RuntimeError):
    """The model a request waited for could not be loaded (the previous one was put back)."""


@dataclass(frozen=True, slots=True)
class SwapRecord:
    """One measured swap."""

    from_model: str
    to_model: str
    seconds: float
    """Wall time from the start of the unload to the new model ready (load and warm-up)."""
    ok: bool
    started_unix_s: float = 0.0
    """When the swap started (Unix seconds): a bench sets the swaps of several replicas side by
    side (two engine restarts at once share the host's CPUs)."""


@dataclass
class _Waiter:
    model: str
    ready: asyncio.Future[None]
    key: tuple[float, int]
    """Its place in the line: (TTFT deadline with `deadline_ordered`, else 0; arrival)."""


class ModelHost(Generic[S]):
    def __init__(
        self, models: Sequence[str], loader: ModelLoader[S], deadline_ordered: bool = False
    ) -> None:
        if not models:
            raise ValueError("models: a model host needs at least one model")
        self.models = tuple(dict.fromkeys(models))
        self.loader = loader
        self.active = self.models[0]
        self._serving: S | None = None
        self._running = 0
        self.deadline_ordered = deadline_ordered
        """The line is ordered by TTFT deadline (the engine's queue is EDF), else by arrival."""
        self._line: list[_Waiter] = []
        self._arrivals = itertools.count()
        self._swap: asyncio.Task[None] | None = None
        self._loading: str | None = None
        """The model the running swap loads."""
        self._order = SwapOrder()
        """The scheduler's swap order not yet carried out (swap_to)."""
        self._start_lock = asyncio.Lock()
        self._started = False
        self.swaps: list[SwapRecord] = []
        self.failed_requests = 0
        """Requests that waited for a model that failed to load (answered with an error)."""
        self.on_swap_end: Callable[[], None] | None = None
        """Called once each swap has ended and its waiting requests were let in (`status`
        then names the model it loaded, or the one put back, and no swap unless the next one
        started at once)."""

    async def start(self) -> S | None:
        """Load the first model (once, whoever calls first); the active model's serving, None
        while a swap runs (nothing is loaded again for a caller that comes then)."""
        async with self._start_lock:
            if not self._started:
                self._serving = await self.loader.load(self.active)
                self._started = True
        return self._serving

    @property
    def target(self) -> str:
        """The model active once the order and the line are served (the last one in line,
        else the ordered, the loading or the active one)."""
        if self._line:
            return max(self._line, key=_place).model
        return self._order.target or self._loading or self.active

    def swap_to(self, model: str) -> None:
        """The scheduler's swap (a ModelSwap decision, SwapOrder's rule): `model` becomes
        active once no request of the active model runs; an order back to the active model
        cancels one not yet carried out."""
        self._check(model)
        self._order.order(model, self.active)
        self._pump()

    def _check(self, model: str) -> None:
        if model not in self.models:
            raise ModelNotServed(
                f"model '{model}' is not served by this replica (valid: {', '.join(self.models)})"
            )

    @property
    def swapping(self) -> bool:
        return self._swap is not None and not self._swap.done()

    @contextlib.asynccontextmanager
    async def use(self, model: str, deadline_s: float = 0.0) -> AsyncIterator[S]:
        """Hold `model` active while the caller serves one request on the yielded serving;
        `deadline_s`: the request's TTFT deadline (any clock the replica's requests share), its
        place in a `deadline_ordered` line."""
        self._check(model)
        await self.start()
        if model != self.active or self._line or self.swapping:
            key = (deadline_s if self.deadline_ordered else 0.0, next(self._arrivals))
            waiter = _Waiter(model, asyncio.get_running_loop().create_future(), key)
            self._line.append(waiter)
            self._pump()
            try:
                await waiter.ready
            except BaseException:
                if waiter in self._line:  # gone before its turn
                    self._line.remove(waiter)
                elif _granted(waiter.ready):  # cancelled as its turn came: give the seat back
                    self._running -= 1
                self._pump()
                raise
        else:
            self._running += 1
        try:
            assert self._serving is not None
            yield self._serving
        finally:
            self._running -= 1
            self._pump()

    def _pump(self) -> None:
        """Let the head of the line in while it wants the active model; once the active model
        has no request running, start the ordered swap, else one to the head's model."""
        if self.swapping:
            return
        while self._line and (first := min(self._line, key=_place)).model == self.active:
            self._line.remove(first)
            if not first.ready.done():
                self._running += 1
                first.ready.set_result(None)
        if self._running:
            return
        head = min(self._line, key=_place).model if self._line else None
        target = self._order.due(self.active, False, head) or head
        if target is not None:
            self._loading = target
            self._swap = asyncio.get_running_loop().create_task(self._swap_to(target))

    async def _swap_to(self, target: str) -> None:
        old, serving = self.active, self._serving
        t0, started = time.monotonic(), time.time()
        ok = True
        try:
            if serving is not None:
                self._serving = None
                await self.loader.unload(old, serving)
            self._serving = await self.loader.load(target)
            self.active = target
            self._order.done(target)
        except Exception as err:  # the waiting head's model did not load: put the old one back
            ok = False
            self._serving = await self.loader.load(old)
            self.active = old
            self._order.done(target)
            for w in [w for w in self._line if w.model == target]:
                self._line.remove(w)
                self.failed_requests += 1
                if not w.ready.done():
                    w.ready.set_exception(SwapFailed(f"model '{target}' failed to load: {err}"))
        finally:
            self.swaps.append(SwapRecord(old, target, time.monotonic() - t0, ok, started))
            self._swap = None
            self._loading = None
            self._pump()
            if self.on_swap_end is not None:
                self.on_swap_end()

    def status(self) -> EngineStatus:
        """The active engine's state; requests waiting for their model count as waiting, and
        while a swap runs the model it loads is reported active, `swapping` (the simulated
        engine's rule: the model a request placed now is served on next)."""
        waiting = len(self._line)
        model, swapping = self._loading or self.active, self._loading is not None
        if self._serving is None:
            return EngineStatus(
                model,
                waiting,
                0,
                0,
                0,
                0,
                0,
                0,
                deadline_ordered=self.deadline_ordered,
                swapping=swapping,
            )
        st = self.loader.status(self._serving)
        return replace(st, active_model=model, waiting=st.waiting + waiting, swapping=swapping)


def _place(waiter: _Waiter) -> tuple[float, int]:
    return waiter.key


def _granted(ready: asyncio.Future[None]) -> bool:
    return ready.done() and not ready.cancelled() and ready.exception() is None
