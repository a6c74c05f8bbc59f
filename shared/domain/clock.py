"""Time sources. Cores never read the wall clock: they are handed a Clock.

`WallClock` drives the live mesh; `VirtualClock` drives the discrete-event simulator and unit tests.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of time in seconds. `sleep` lets async shells wait on the same time axis."""

    def now(self) -> float:
        """Seconds since this clock's origin."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` on this clock's time axis."""
        ...


class WallClock:
    """Monotonic wall time, origin at construction."""

    def __init__(self) -> None:
        self._origin = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._origin

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """Time that only moves when told to. `sleep` advances it at once (no real waiting)."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = start_s

    def now(self) -> float:
        return self._now

    def advance_to(self, t_s: float) -> None:
        """Move time forward to `t_s`; moving backwards is a bug in the caller."""
        if t_s < self._now - 1e-12:
            raise ValueError(f"VirtualClock cannot go back in time: {t_s} < {self._now}")
        self._now = max(self._now, t_s)

    async def sleep(self, seconds: float) -> None:
        self.advance_to(self._now + max(0.0, seconds))
        await asyncio.sleep(0)
