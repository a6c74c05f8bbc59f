"""The SLO autoscaling policy as Ray Serve's custom autoscaling-policy hook (Ray 2.60).

A per-model replica pool (services/replica/pool.py) names this class in its deployment's
`autoscaling_config.policy.policy_function` ("services.scheduler.autoscale_hook:ServeScalingPolicy")
with `policy_kwargs` {"model": ..., "autoscale": AutoscaleConfig fields}. Serve instantiates it
once in its controller and calls it every control-loop tick with an `AutoscalingContext`; it
returns (desired replicas, policy state). The scheduler's predicted load reaches it as the pool
replicas' custom metrics (`record_autoscaling_stats` asks the scheduler for `wire.encode` of the
model's `ModelLoad`); the replica counts come from the context (running, and target - running
starting). Serve then applies its bounds and its own delays, which the pool sets to 0: the
policy's delays and hysteresis are the ones that count.
"""

from __future__ import annotations

import time
from typing import Any

from services.scheduler.core.autoscale.base import ScaleDecision
from services.scheduler.core.autoscale.config import AutoscaleConfig
from services.scheduler.core.autoscale.registry import create_scaling_policy
from services.scheduler.core.autoscale.wire import decode


def latest_metrics(ctx: Any) -> dict[str, float]:
    """The newest sample of each custom metric over the deployment's replicas (all of them
    relay the same scheduler signal); Serve's look-back aggregates when no raw series exist."""
    raw = getattr(ctx, "raw_metrics", None) or {}
    out: dict[str, float] = {}
    for name, per_replica in raw.items():
        best: tuple[float, float] | None = None
        for series in per_replica.values():
            for point in series or ():
                if best is None or point.timestamp > best[0]:
                    best = (point.timestamp, float(point.value))
        if best is not None:
            out[name] = best[1]
    if not out:
        for name, per_replica in (getattr(ctx, "aggregated_metrics", None) or {}).items():
            if per_replica:
                out[name] = max(float(v) for v in per_replica.values())
    return out


class ServeScalingPolicy:
    """Serve's policy callable: one instance per deployment, state kept between ticks."""

    def __init__(self, model: str, autoscale: dict[str, Any] | None = None) -> None:
        self.model = model
        self.config = AutoscaleConfig.model_validate(autoscale or {})
        self.policy = create_scaling_policy(self.config)
        self._last_s = -float("inf")
        self._last: ScaleDecision | None = None

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        now = ctx.current_time if ctx.current_time is not None else time.time()
        ready = int(ctx.current_num_replicas)
        target = int(ctx.target_num_replicas)
        if self._last is not None and now - self._last_s < self.config.interval_s:
            return target, self._state()  # decide once per interval, as in the simulator
        load = decode(latest_metrics(ctx), self.model, now, ready, max(target - ready, 0))
        self._last_s = now
        if load is None:
            self._last = ScaleDecision(target, "no signal from the scheduler yet")
        else:
            self._last = self.policy.decide(load)
        return self._last.replicas, self._state()

    def _state(self) -> dict[str, Any]:
        d = self._last
        if d is None:
            return {}
        out: dict[str, Any] = {"slomesh_desired": d.replicas, "slomesh_reason": d.reason}
        if d.predicted_attainment is not None:
            out["slomesh_predicted_attainment"] = d.predicted_attainment
        return out
