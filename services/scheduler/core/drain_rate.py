"""How fast the global queue drains: dispatches per second over a sliding window.

Admission uses it to answer at once a request that would wait longer than it may: with `q`
requests queued ahead and the queue draining at `r` requests/s, the new request's expected wait is
q / r (Little's law on the queue). Before the window holds enough dispatches to measure (start-up,
light load) there is no estimate and nothing is rejected on it.
"""

from __future__ import annotations

from collections import deque


class DrainRate:
    def __init__(self, window_s: float = 5.0, min_samples: int = 8) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.window_s = window_s
        self.min_samples = min_samples
        self._times: deque[float] = deque()

    def record(self, now_s: float) -> None:
        """One request left the queue for a replica at `now_s`."""
        self._times.append(now_s)
        self._trim(now_s)

    def rate_rps(self, now_s: float) -> float | None:
        """Dispatches per second over the window; None while too few to measure."""
        self._trim(now_s)
        if len(self._times) < self.min_samples:
            return None
        span = max(now_s - self._times[0], self.window_s / 2)
        return len(self._times) / span

    def expected_wait_s(self, queued_ahead: int, now_s: float) -> float | None:
        """Expected wait of a request with `queued_ahead` requests before it; None: unknown."""
        rate = self.rate_rps(now_s)
        if rate is None:
            return None
        return queued_ahead / rate

    def _trim(self, now_s: float) -> None:
        while self._times and now_s - self._times[0] > self.window_s:
            self._times.popleft()
