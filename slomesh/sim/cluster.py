"""Cluster configuration for a simulated (or planned) deployment: which GPUs serve which models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.domain.engine import EngineConfig


class InstanceSpec(BaseModel):
    """One serving instance (a GPU, or a tensor-parallel group of identical GPUs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str
    """GPU type name from the catalogue, e.g. "A100-80GB"."""
    models: list[str] = Field(min_length=1)
    """Models this instance may serve (swapping between them); the first starts GPU-active."""
    tensor_parallel: int | None = Field(None, ge=1)
    """GPUs per instance; None picks the smallest power of two the largest model needs."""
    count: int = Field(1, ge=1)
    """How many identical instances of this kind."""
    profile_file: str | None = None
    """Measured profiles of this instance's models on `gpu` (a shared/profiles/io.py file; a
    relative path is read from the repository's deploy/ray/profiles) instead of the roofline
    catalogue; None: the catalogue."""


class ClusterSpec(BaseModel):
    """The serving instances of a run plus the engine settings they share."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instances: list[InstanceSpec] = Field(min_length=1)
    """Instance kinds; a cluster needs at least one instance."""
    engine: EngineConfig = EngineConfig()
    """Engine settings; the serving stack overrides queue policy, batching and preemption mode."""
    concurrent_load_slowdown: float = Field(0.0, ge=0)
    """The instances share one host's CPUs, and a model load (an engine restart) runs at
    1 / (1 + this x (k - 1)) of its profiled speed while k loads run at once
    (slomesh/sim/host_loads.py); 0: every load takes its profiled time, whatever else loads."""

    @model_validator(mode="after")
    def _positive(self) -> ClusterSpec:
        if sum(i.count for i in self.instances) < 1:
            raise ValueError("cluster.instances must hold at least one instance")
        return self

    @property
    def num_instances(self) -> int:
        return sum(i.count for i in self.instances)

    def with_instances(self, n: int) -> ClusterSpec:
        """Scale the cluster to `n` instances, cycling through the instance kinds in order."""
        if n < 1:
            raise ValueError(f"instances must be >= 1, got {n}")
        flat = [i.model_copy(update={"count": 1}) for i in self.instances for _ in range(i.count)]
        chosen = [flat[k % len(flat)] for k in range(n)]
        return self.model_copy(update={"instances": chosen})
