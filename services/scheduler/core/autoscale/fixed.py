"""The `fixed` policy: a constant fleet (the baseline sized for the peak)."""

from __future__ import annotations

from services.scheduler.core.autoscale.base import ScaleDecision, ScalingPolicy, clamp
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.signal import ModelLoad


class FixedPolicy(ScalingPolicy):
    name = "fixed"

    def __init__(self, config: AutoscaleConfig) -> None:
        self.replicas = clamp(config.fixed.replicas, config.min_replicas, config.max_replicas)

    def decide(self, load: ModelLoad) -> ScaleDecision:
        return ScaleDecision(self.replicas, "fixed")
