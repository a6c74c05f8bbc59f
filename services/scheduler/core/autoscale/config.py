"""Typed configuration of the autoscaling policies (one place for every knob, with units)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SLOScalingConfig(BaseModel):
    """The `slo` policy: scale on the RWT-predicted attainment of the queue and the arrival rate."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    target_attainment: float = Field(0.97, gt=0.0, le=1.0)
    """Fraction of the queued requests whose predicted wait must be within their TTFT SLO; with
    fewer predicted on time, replicas are added until enough are."""
    target_utilization: float = Field(0.9, gt=0.0, le=1.0)
    """Scale up when the forecast token demand exceeds this fraction of the replicas' token
    throughput Θ (QLM Eq. 15): the headroom the queue needs to stay short."""
    scale_down_utilization: float = Field(0.7, gt=0.0, le=1.0)
    """Scale down only to a count at which the demand seen over the scale-down window stays
    below this fraction of Θ. The gap to `target_utilization` is the hysteresis band."""
    scale_down_delay_s: float = Field(120.0, ge=0.0)
    """Seconds a scale-down must be wanted without interruption before it is done."""
    upscale_delay_s: float = Field(0.0, ge=0.0)
    """Seconds a scale-up must be wanted before it is done (0: at once; the replica's start-up
    time is already a delay, and it is part of the decision)."""
    slo_percentile: float = Field(0.95, gt=0.5, lt=1.0)
    """Quantile of the tokens ahead (QLM Eq. 3) the predicted waits are taken at."""
    forecast_window_s: float = Field(60.0, gt=0.0)
    """The arrival-rate trend is extrapolated over start-up + interval, at most this far."""

    @model_validator(mode="after")
    def _band(self) -> SLOScalingConfig:
        if self.scale_down_utilization >= self.target_utilization:
            raise ValueError(
                "scale_down_utilization must be < target_utilization (the hysteresis band), got "
                f"{self.scale_down_utilization} >= {self.target_utilization}"
            )
        return self


class OngoingRequestsConfig(BaseModel):
    """The `ongoing-requests` policy: Ray Serve's default autoscaling policy, simulated."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    target_ongoing_requests: float = Field(64.0, gt=0.0)
    """Requests (running + queued) per replica Serve aims at (Serve's default is 2, meant for
    one-request-at-a-time replicas; an LLM replica batches up to max_num_seqs)."""
    look_back_period_s: float = Field(30.0, gt=0.0)
    """The ongoing-request count is averaged over this window (Serve: look_back_period_s)."""
    upscale_delay_s: float = Field(30.0, ge=0.0)
    """Serve's upscale_delay_s default."""
    downscale_delay_s: float = Field(600.0, ge=0.0)
    """Serve's downscale_delay_s default."""


class FixedConfig(BaseModel):
    """The `fixed` policy: a constant fleet."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    replicas: int = Field(2, ge=1)
    """Replicas at all times."""


class AutoscaleConfig(BaseModel):
    """One model's autoscaler: the policy, its bounds and how often it decides."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    policy: str = "slo"
    """Policy name from services/scheduler/core/autoscale/registry.py (slo, ongoing-requests,
    fixed)."""
    min_replicas: int = Field(1, ge=1)
    """Fewest replicas."""
    max_replicas: int = Field(16, ge=1)
    """Most replicas."""
    interval_s: float = Field(10.0, gt=0.0)
    """Seconds between two decisions (Serve's control loop and metrics push are ~10 s)."""
    startup_overhead_s: float = Field(30.0, ge=0.0)
    """Seconds a new replica takes before it serves, beyond loading the weights (the profile's
    load time): actor start, engine init, CUDA-graph capture."""
    slo: SLOScalingConfig = SLOScalingConfig()
    """Settings of the `slo` policy."""
    ongoing_requests: OngoingRequestsConfig = OngoingRequestsConfig()
    """Settings of the `ongoing-requests` policy."""
    fixed: FixedConfig = FixedConfig()
    """Settings of the `fixed` policy."""

    @model_validator(mode="after")
    def _bounds(self) -> AutoscaleConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas must be <= max_replicas, got {self.min_replicas} > "
                f"{self.max_replicas}"
            )
        return self
