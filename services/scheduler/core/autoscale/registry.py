"""Autoscaling policies by name (one registry); `create_scaling_policy` builds one per model."""

from __future__ import annotations

from services.scheduler.core.autoscale.base import ScalingPolicy
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.fixed import FixedPolicy
from services.scheduler.core.autoscale.ongoing_requests import OngoingRequestsPolicy
from services.scheduler.core.autoscale.slo import SLOPolicy
from shared.policy import Registry

SCALING_POLICIES: Registry[ScalingPolicy] = Registry(
    "autoscaling policy",
    {"slo": SLOPolicy, "ongoing-requests": OngoingRequestsPolicy, "fixed": FixedPolicy},
)
"""name -> factory(AutoscaleConfig)."""


def create_scaling_policy(config: AutoscaleConfig) -> ScalingPolicy:
    """A fresh policy (with its own state) for one model; an unknown name lists the valid ones."""
    return SCALING_POLICIES.create(config.policy, config)
