"""The `ongoing-requests` policy: Ray Serve's default autoscaling policy, simulated.

Serve (serve/autoscaling_policy.py, `replica_queue_length_autoscaling_policy`, Ray 2.60):
desired = running replicas · (ongoing / (target · running replicas)) = ongoing / target, with
the ongoing requests averaged over `look_back_period_s`; scaling factors 1 round it up; the
delay rule holds a change until it has been wanted for upscale_delay_s / downscale_delay_s.
"""

from __future__ import annotations

import math
from collections import deque

from services.scheduler.core.autoscale.base import DelayRule, ScaleDecision, ScalingPolicy, clamp
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.signal import ModelLoad


class OngoingRequestsPolicy(ScalingPolicy):
    name = "ongoing-requests"

    def __init__(self, config: AutoscaleConfig) -> None:
        self.cfg = config
        self.o = config.ongoing_requests
        self._delay = DelayRule(self.o.upscale_delay_s, self.o.downscale_delay_s)
        self._samples: deque[tuple[float, float]] = deque()

    def decide(self, load: ModelLoad) -> ScaleDecision:
        now = load.now_s
        self._samples.append((now, load.ongoing_requests))
        while self._samples[0][0] < now - self.o.look_back_period_s:
            self._samples.popleft()
        ongoing = sum(v for _, v in self._samples) / len(self._samples)
        if load.ready_replicas == 0:
            return ScaleDecision(max(load.replicas, self.cfg.min_replicas), "no running replica")
        want = math.ceil(ongoing / self.o.target_ongoing_requests - 1e-9)
        want = clamp(max(want, 1), self.cfg.min_replicas, self.cfg.max_replicas)
        got = self._delay.apply(want, load.replicas, now)
        why = f"{ongoing:.1f} ongoing / target {self.o.target_ongoing_requests:g} -> {want}"
        return ScaleDecision(got, why)
