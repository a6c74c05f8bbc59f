"""Arrival-rate and output-length bookkeeping behind a `ModelLoad` (one per model).

The scheduler (or the simulator) reports arrivals and completions as they happen; at each
decision `snapshot` turns the last windows into the rate, its trend and the predicted output per
request. Pure: times are passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from services.scheduler.core.autoscale.signal import ModelLoad, QueuedWork


class LoadTracker:
    """Arrivals and completions of one model over sliding windows."""

    def __init__(
        self,
        model: str,
        window_s: float,
        prior_output_tokens: float,
        *,
        trend_window_s: float = 90.0,
        completions: int = 200,
    ) -> None:
        if window_s <= 0 or trend_window_s <= 0:
            raise ValueError(
                f"window_s and trend_window_s must be > 0, got {window_s}, {trend_window_s}"
            )
        self.model = model
        self.window_s = window_s
        self.trend_window_s = trend_window_s
        self._arrivals: deque[float] = deque()
        self._outputs: deque[int] = deque(maxlen=completions)
        self._prior = prior_output_tokens
        self._rates: deque[tuple[float, float]] = deque()

    def arrival(self, now_s: float) -> None:
        self._arrivals.append(now_s)

    def finished(self, output_tokens: int) -> None:
        self._outputs.append(output_tokens)

    @property
    def mean_output_tokens(self) -> float:
        """Mean output of the recent completions (the prior until one finishes)."""
        return sum(self._outputs) / len(self._outputs) if self._outputs else self._prior

    @property
    def var_output_tokens(self) -> float:
        n = len(self._outputs)
        if n < 2:
            return 0.0
        m = self.mean_output_tokens
        return sum((x - m) ** 2 for x in self._outputs) / (n - 1)

    def snapshot(
        self,
        now_s: float,
        *,
        ready: int,
        starting: int,
        ongoing: float,
        queue_slacks_s: Sequence[float],
        replica_tokens_s: float,
        prefill_s: float,
        startup_s: float,
    ) -> ModelLoad:
        """The model's load now. The rate counts arrivals over the last `window_s`; the trend
        is the least-squares slope of the snapshots' rates over the last `trend_window_s`."""
        while self._arrivals and self._arrivals[0] < now_s - self.window_s:
            self._arrivals.popleft()
        rate = len(self._arrivals) / self.window_s
        self._rates.append((now_s, rate))
        while self._rates[0][0] < now_s - self.trend_window_s:
            self._rates.popleft()
        trend = _slope(self._rates)
        mean, var = self.mean_output_tokens, self.var_output_tokens
        queue = tuple(QueuedWork(s, mean, var) for s in sorted(queue_slacks_s))
        return ModelLoad(
            model=self.model,
            now_s=now_s,
            ready_replicas=ready,
            starting_replicas=starting,
            ongoing_requests=ongoing,
            arrival_rate_rps=rate,
            arrival_trend_rps_s=trend,
            mean_output_tokens=mean,
            replica_tokens_s=replica_tokens_s,
            prefill_s=prefill_s,
            replica_startup_s=startup_s,
            queue=queue,
        )


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points (0 with fewer than 3)."""
    n = len(points)
    if n < 3:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx
