"""The pipeline's side of the reject gate (core/reject_gate.py: the key of a request, the
429 a held request gets, and the scheduler's verdicts fed back) and of the guard on delivered
latency (core/delivered.py), on the monotonic clock."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig
from services.ingress.core.errors import overloaded
from services.ingress.core.reject_gate import GateKey, RejectGate
from services.ingress.observer import RequestObserver
from shared.domain import Request


def gate_key(req: Request) -> GateKey:
    return GateKey(req.model, round(req.slo.ttft_deadline_s * 1e3), req.criticality)


class AdmissionGate:
    """Answers requests the scheduler would reject anyway (429 + Retry-After at once)."""

    def __init__(self, hold_off_s: float, observer: RequestObserver) -> None:
        self.gate = RejectGate(hold_off_s)
        self.observer = observer

    @property
    def held(self) -> int:
        return self.gate.held

    def check(self, req: Request) -> None:
        """Raises the 429 APIError when the gate holds `req`'s key."""
        held = self.gate.check(gate_key(req), time.monotonic())
        if held is not None:
            self.observer.rejected(req.slo.class_name, held.reason)
            raise overloaded(held.reason, held.retry_after_s, drop_reason=held.drop_reason)

    def observe(self, req: Request, reply: Any) -> None:
        """The scheduler's AdmitReply for `req`."""
        self.gate.observe(
            gate_key(req),
            bool(reply.admitted),
            str(reply.drop_reason),
            float(reply.retry_after_s),
            str(reply.reason),
            time.monotonic(),
        )


class LoopLag:
    """How late this event loop runs its callbacks: a task sleeps `interval_s` again and again
    and records how much longer each sleep took; `recent_s` is the largest lateness of the last
    `window_s`. Every step of a new request (its admission, its first chunk's relay) waits about
    that long on a loop this busy. The task runs while requests come: it ends once `linger_s`
    passed without a `start` (an idle ingress wakes for nothing), and the next `start` runs it
    again; a request after such a pause sees no lateness, as a loop without requests has
    little."""

    def __init__(
        self,
        interval_s: float = 0.05,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        linger_s: float = 2.0,
    ) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self.linger_s = linger_s
        self._clock = clock
        self._sleep = sleep
        self._late: deque[tuple[float, float]] = deque()
        self._task: asyncio.Task[None] | None = None
        self._used = clock()

    def start(self) -> None:
        """Measure on the running loop from now until `linger_s` passes without a call."""
        self._used = self._clock()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run())

    @property
    def running(self) -> bool:
        """Whether the measuring task runs now."""
        return self._task is not None and not self._task.done()

    async def run(self, ticks: int | None = None) -> None:
        n = 0
        while (ticks is None or n < ticks) and self._clock() - self._used <= self.linger_s:
            t0 = self._clock()
            await self._sleep(self.interval_s)
            now = self._clock()
            self._late.append((now, max(0.0, now - t0 - self.interval_s)))
            n += 1

    def recent_s(self) -> float:
        horizon = self._clock() - self.window_s
        while self._late and self._late[0][0] < horizon:
            self._late.popleft()
        return max((late for _, late in self._late), default=0.0)


class DeliveredGate:
    """Answers requests predicted to miss their SLO on what this ingress's streams measured
    (429 + Retry-After at once, drop reason `deadline-infeasible`), and feeds the guard the
    times of the streams it lets in. The loop's current lateness (`LoopLag`) goes to the guard,
    which counts it as time the request has already spent: its admission and first chunk will
    wait that long here."""

    def __init__(self, config: DeliveredGuardConfig, observer: RequestObserver) -> None:
        self.guard = DeliveredGuard(config)
        self.observer = observer
        self.lag = LoopLag()

    def check(self, req: Request) -> None:
        """Raises the 429 APIError when `req` is predicted to miss its TTFT or TPOT objective."""
        self.lag.start()
        waited = max(0.0, time.time() - req.arrival_s)
        slo = req.slo
        verdict = self.guard.check(
            req.model,
            slo.ttft_deadline_s,
            slo.tpot_target_s,
            waited,
            time.monotonic(),
            self.lag.recent_s(),
        )
        if not verdict.admit:
            self.observer.rejected(slo.class_name, verdict.reason)
            raise overloaded(
                verdict.reason, verdict.retry_after_s, drop_reason="deadline-infeasible"
            )

    def start(self, req: Request, streamed: bool) -> None:
        """`req` was let in: its stream's times become samples (`streamed`: its tokens go out
        as they come; an answer sent whole leaves none)."""
        self.guard.start(
            req.request_id,
            req.model,
            req.slo.ttft_deadline_s,
            time.monotonic(),
            streamed,
            req.max_tokens,
        )

    def first_token(self, request_id: str) -> None:
        self.guard.first_token(request_id, time.monotonic())

    def end(self, request_id: str, output_tokens: int) -> None:
        self.guard.end(request_id, output_tokens, time.monotonic())
