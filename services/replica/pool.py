"""A per-model replica pool: the replica deployment with several Serve replicas behind one
application, scaled by Serve's autoscaler through a custom policy (Ray 2.60
`autoscaling_config.policy.policy_function`), by default the scheduler's SLO policy
(`services.scheduler.autoscale_hook:ServeScalingPolicy`, named here as a string: the replica
service does not import the scheduler).

The policy runs in Serve's controller and reads the pool replicas' custom autoscaling metrics:
each replica's `record_autoscaling_stats` asks the scheduler application for the model's
autoscaling signal (its AutoscaleSignal method, over a Serve handle) and returns it. The
scheduler sees the pool as one replica (`pooled: true` in its replica list) whose admission limit
and engine size grow with the replicas that ask for the signal; Serve's router spreads the pool's
streams over its replicas.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from services.replica.args import ReplicaArgs
from services.replica.deployment import ReplicaDeployment

DEFAULT_POLICY = "services.scheduler.autoscale_hook:ServeScalingPolicy"


class PoolArgs(BaseModel):
    """Arguments of a replica-pool application."""

    model_config = ConfigDict(extra="forbid")

    replica: dict[str, Any] = Field(default_factory=dict)
    """The replicas' settings (ReplicaArgs fields; `application` is the pool's name)."""
    min_replicas: int = Field(1, ge=1)
    """Fewest Serve replicas."""
    max_replicas: int = Field(4, ge=1)
    """Most Serve replicas."""
    policy_function: str = DEFAULT_POLICY
    """Serve autoscaling policy, `module:attribute` (a class is instantiated once with
    policy_kwargs)."""
    autoscale: dict[str, Any] = Field(default_factory=dict)
    """The policy's AutoscaleConfig fields (services/scheduler/core/autoscale/config.py)."""
    scheduler_application: str = "scheduler"
    """Serve application whose AutoscaleSignal the replicas relay."""


# the replica class under Serve's decorator (typed by mypy as the class itself)
_Replica: Any = ReplicaDeployment.func_or_class  # type: ignore[attr-defined]


class _PoolReplica(_Replica):  # type: ignore[misc]
    def __init__(self, args: dict[str, Any], scheduler_application: str) -> None:
        super().__init__(args)
        self._scheduler_application = scheduler_application
        self._scheduler: Any = None

    async def Endpoint(self) -> str:
        """No own server for the callers: Serve's router spreads a pool's streams."""
        return ""

    async def record_autoscaling_stats(self) -> dict[str, float]:
        """Serve's custom-metrics hook: the scheduler's signal for this pool's model."""
        if self._scheduler is None:
            self._scheduler = serve.get_app_handle(self._scheduler_application)
        replica_id = serve.get_replica_context().replica_id.unique_id
        signal: dict[str, float] = await self._scheduler.AutoscaleSignal.remote(
            self.args.model, self.args.application, replica_id
        )
        return signal


PoolDeployment = serve.deployment(name="ReplicaPool", max_ongoing_requests=1024)(_PoolReplica)


def build_pool_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.replica.pool:build_pool_app`)."""
    parsed = PoolArgs.model_validate(args)
    if parsed.min_replicas > parsed.max_replicas:
        raise ValueError(
            f"pool.min_replicas must be <= max_replicas, got {parsed.min_replicas} > "
            f"{parsed.max_replicas}"
        )
    replica = ReplicaArgs.model_validate(parsed.replica)
    autoscale = {**parsed.autoscale, "min_replicas": parsed.min_replicas}
    autoscale["max_replicas"] = parsed.max_replicas
    deployment = PoolDeployment.options(
        max_ongoing_requests=replica.max_ongoing_requests,
        autoscaling_config={
            "min_replicas": parsed.min_replicas,
            "initial_replicas": parsed.min_replicas,
            "max_replicas": parsed.max_replicas,
            # the policy holds its own delays and hysteresis; Serve's would add to them
            "upscale_delay_s": 0.0,
            "downscale_delay_s": 0.0,
            "look_back_period_s": 15.0,
            "policy": {
                "policy_function": parsed.policy_function,
                "policy_kwargs": {"model": replica.model, "autoscale": autoscale},
            },
        },
    )
    app: Application = deployment.bind(
        replica.model_dump(mode="json"), parsed.scheduler_application
    )
    return app
