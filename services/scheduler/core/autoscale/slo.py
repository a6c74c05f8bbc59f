"""The `slo` autoscaling policy: replicas from the scheduler's predicted attainment.

Two demands, the larger wins (scale-up at once, or after `upscale_delay_s`):
- rate: the arrival rate, extrapolated along its trend over the replica's start-up time plus one
  interval (a replica started now serves only then), times the predicted output per request, is
  a token demand; n_rate = ceil(demand / (Θ · target_utilization)), Θ from QLM Eq. 15.
- queue: the fewest replicas at which the RWT estimate (QLM Eqs. 1-3, `predicted_attainment`,
  start-up time included) puts at least `target_attainment` of the queued requests within their
  TTFT SLO.
Scale-down (hysteresis and delay): to n_down = ceil(peak demand / (Θ · scale_down_utilization)),
the peak of the forecast demand over the last `scale_down_delay_s`, when that is below the
current count, no scale-up happened in that window and the queue is still met at n_down.
Adding a replica costs its start-up time, so the band keeps it from being removed and added
back within a swing of the bursty rate.
"""

from __future__ import annotations

import math
from collections import deque

from services.scheduler.core.autoscale.base import DelayRule, ScaleDecision, ScalingPolicy, clamp
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.signal import ModelLoad, predicted_attainment
from services.scheduler.core.qlm.rwt import z_for_percentile


class SLOPolicy(ScalingPolicy):
    name = "slo"

    def __init__(self, config: AutoscaleConfig) -> None:
        self.cfg = config
        self.s = config.slo
        self.z = z_for_percentile(self.s.slo_percentile)
        self._up = DelayRule(self.s.upscale_delay_s, 0.0)
        self._rates: deque[tuple[float, float]] = deque()
        self._last_up_s = -math.inf

    def decide(self, load: ModelLoad) -> ScaleDecision:
        s, now, cur = self.s, load.now_s, load.replicas
        theta = load.replica_tokens_s
        horizon = min(load.replica_startup_s + self.cfg.interval_s, s.forecast_window_s)
        rate = load.arrival_rate_rps + max(load.arrival_trend_rps_s, 0.0) * horizon
        self._rates.append((now, max(rate, load.peak_rate_rps or 0.0)))
        while self._rates and self._rates[0][0] < now - s.scale_down_delay_s:
            self._rates.popleft()
        n_rate = math.ceil(rate * load.mean_output_tokens / (theta * s.target_utilization))
        n_queue = self._queue_replicas(load)
        attained = predicted_attainment(load, cur, self.z)
        up = clamp(max(n_rate, n_queue), self.cfg.min_replicas, self.cfg.max_replicas)
        if up > cur:
            got = self._up.apply(up, cur, now)
            if got > cur:
                self._last_up_s = now
            why = f"demand {rate:.2f} r/s needs {n_rate}, queue attainment {attained:.2f} needs"
            return ScaleDecision(got, f"{why} {n_queue}", attained)
        self._up.apply(cur, cur, now)
        peak = max(r for _, r in self._rates)
        n_down = math.ceil(peak * load.mean_output_tokens / (theta * s.scale_down_utilization))
        n_down = clamp(max(n_down, n_queue), self.cfg.min_replicas, self.cfg.max_replicas)
        calm = now - self._last_up_s >= s.scale_down_delay_s - 1e-9
        if n_down < cur and calm and load.starting_replicas == 0:
            why = f"peak {peak:.2f} r/s over {s.scale_down_delay_s:g}s fits {n_down}"
            return ScaleDecision(n_down, why, attained)
        return ScaleDecision(cur, "hold", attained)

    def _queue_replicas(self, load: ModelLoad) -> int:
        """Fewest replicas whose predicted queue attainment meets the target (max if none)."""
        lo, hi = self.cfg.min_replicas, self.cfg.max_replicas
        if predicted_attainment(load, hi, self.z) < self.s.target_attainment:
            return hi
        while lo < hi:  # attainment grows with replicas: bisect
            mid = (lo + hi) // 2
            if predicted_attainment(load, mid, self.z) >= self.s.target_attainment:
                hi = mid
            else:
                lo = mid + 1
        return lo
