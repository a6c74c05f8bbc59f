"""What an autoscaling policy sees of one model: its replicas, its queue and its arrivals.

The scheduler (live) or the simulator builds a `ModelLoad` every decision interval; policies never
see requests or instances, only these numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueuedWork:
    """One queued request: its time left to the TTFT deadline and its predicted output."""

    slack_s: float
    """TTFT deadline minus now (negative: already late)."""
    output_tokens_mean: float
    """Predicted output tokens (the length predictor's mean, not the true length)."""
    output_tokens_var: float = 0.0
    """Variance of that prediction (tokens²)."""


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """One model's state at a decision, as the scheduler predicts it."""

    model: str
    now_s: float
    ready_replicas: int
    """Replicas serving now."""
    starting_replicas: int
    """Replicas started but not yet serving."""
    ongoing_requests: float
    """Requests running or queued anywhere for this model (what Serve's default policy counts)."""
    arrival_rate_rps: float
    """Arrivals per second over the last decision window."""
    arrival_trend_rps_s: float
    """Slope of the arrival rate (requests/s per second): queue growth ahead."""
    mean_output_tokens: float
    """Predicted output tokens of a typical request (from completions)."""
    replica_tokens_s: float
    """Θ: output tokens per second one replica serves (QLM Eq. 15, from the profile)."""
    prefill_s: float
    """P: prefill time of a typical request (QLM Eq. 1)."""
    replica_startup_s: float
    """Seconds from starting a replica to it serving: the profile's load time + overhead."""
    queue: tuple[QueuedWork, ...] = ()
    """Requests waiting for a replica, in serving (deadline) order."""
    peak_rate_rps: float | None = None
    """Highest arrival rate over the scale-down window (None: use arrival_rate_rps)."""

    def __post_init__(self) -> None:
        for name in (
            "ready_replicas",
            "starting_replicas",
            "ongoing_requests",
            "arrival_rate_rps",
            "mean_output_tokens",
            "prefill_s",
            "replica_startup_s",
        ):
            value = float(getattr(self, name))
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"ModelLoad.{name} must be finite and >= 0, got {value}")
        if not (math.isfinite(self.replica_tokens_s) and self.replica_tokens_s > 0):
            raise ValueError(
                f"ModelLoad.replica_tokens_s must be finite and > 0, got {self.replica_tokens_s}"
            )

    @property
    def replicas(self) -> int:
        """Ready plus starting: the count a decision is compared with."""
        return self.ready_replicas + self.starting_replicas


def predicted_attainment(load: ModelLoad, replicas: int, z: float) -> float:
    """Fraction of the queued requests predicted to get their first token in time if the model
    had `replicas` replicas (1.0 for an empty queue).

    RWT (QLM §6, Eqs. 1-3) on one queue served by all replicas of the model: request q waits
    for the output tokens queued ahead of it, W_q = q_z(Σ_{i<q} O_i) / (n·Θ), then its prefill
    P. Replicas not serving yet add their Θ only after `replica_startup_s`: until then the queue
    drains at ready·Θ, so a token mark T is reached at T/(ready·Θ) if that is before start-up,
    else at start-up + (T − ready·Θ·start-up)/(n·Θ).
    """
    if not load.queue:
        return 1.0
    theta = load.replica_tokens_s
    ready = min(load.ready_replicas, replicas)
    startup = load.replica_startup_s
    early_tokens = ready * theta * startup
    met = 0
    mean = var = 0.0
    for item in load.queue:
        tokens = mean + z * math.sqrt(var)
        if ready > 0 and tokens <= early_tokens:
            wait = tokens / (ready * theta)
        else:
            wait = startup + (tokens - early_tokens) / (max(replicas, 1) * theta)
        if wait + load.prefill_s <= item.slack_s:
            met += 1
        mean += item.output_tokens_mean
        var += item.output_tokens_var
    return met / len(load.queue)
