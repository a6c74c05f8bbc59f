"""Inventory, demands and plans of the deployer (the Node/ModelDemand/Placement messages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from services.deployer.core.inventory import HELRParams, Inventory
from services.deployer.core.tiers import TierPlan
from shared.profiles import RooflineParams

Engine = Literal["vllm", "simulated"]
ENGINES: tuple[str, ...] = get_args(Engine)

CPU_DEVICE = "cpu"
"""GPU type of CPU-only nodes, whose `gpus` count engine slots (0: unlimited)."""


@dataclass(frozen=True, slots=True)
class Node:
    """One host: its name, the type of every GPU on it ("cpu" for CPU-only) and how many.

    On a CPU-only node `gpus` counts engine slots; 0 means no limit.
    """

    name: str
    gpu: str
    gpus: int

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("node.name must not be empty")
        if not self.gpu:
            raise ValueError(f"node.gpu must not be empty (node {self.name})")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise ValueError(f"node.gpus must be an int >= 0, got {self.gpus!r} (node {self.name})")


@dataclass(frozen=True, slots=True)
class ModelDemand:
    """Replicas wanted of one served model."""

    model: str
    replicas: int

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model_demand.model must not be empty")
        bad = isinstance(self.replicas, bool) or not isinstance(self.replicas, int)
        if bad or self.replicas < 0:
            raise ValueError(
                f"model_demand.replicas must be an int >= 0, got {self.replicas!r} ({self.model})"
            )


def replica_name(k: int) -> str:
    """Serve application name of the k-th placed replica."""
    return f"replica-{k}"


@dataclass(frozen=True, slots=True)
class Placement:
    """One replica: its Serve application, where it runs and its tensor-parallel group.

    gpu_ids: indices of the node's GPUs the plan reserves for it (empty on CPU nodes); Ray picks
    the physical devices, so these only account for capacity and make plans easy to read.

    HELR placements (pipeline_parallel >= 1 stages of tensor_parallel 1) also set: the layers of
    every stage (layer_partition, summing to the model's layers), the node of every stage
    (stage_nodes; gpu_ids then index GPUs on those nodes, stage by stage), the route latency
    estimate and the model tiers for QLM's swapping. The defaults are first-fit's single stage.
    """

    application: str
    node: str
    gpu: str
    model: str
    tensor_parallel: int
    gpu_ids: tuple[int, ...] = ()
    pipeline_parallel: int = 1
    layer_partition: tuple[int, ...] = ()
    stage_nodes: tuple[str, ...] = ()
    latency_s: float | None = None
    model_tiers: TierPlan | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """Placements in placement order (application "replica-<k>" is the k-th) and the demands
    that could not be placed, each as one line with the rule that failed."""

    placements: tuple[Placement, ...]
    unplaced: tuple[str, ...]
    engine: Engine
    planner: str


class PlanOptions(BaseModel):
    """How to plan placements."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    planner: str = "first-fit"
    """Placement planner, a name from the PLANNERS registry."""

    cpu_models: tuple[str, ...] = ()
    """Models small enough for CPU replicas (e.g. the locally built tiny model). Only these go on
    "cpu" nodes (tensor_parallel 1); catalogued 7B+ models never do."""

    roofline: RooflineParams = Field(default_factory=RooflineParams)
    """Memory model deciding the smallest tensor_parallel that fits (as the profiler uses)."""

    inventory: Inventory | None = None
    """GPU inventory of the HELR planners (memory, speed, links, host memory); None: built from
    the nodes with catalog figures and default link latencies. first-fit ignores it."""

    helr: HELRParams = Field(default_factory=HELRParams)
    """HELR's KV reserve T, p, a1/a2 overrides and DP size limit. first-fit ignores it."""


def check_inventory(nodes: list[Node], demands: list[ModelDemand], engine: str) -> None:
    """Node names and demanded models must be unique; engine must be "vllm" or "simulated"."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise ValueError(f"nodes: duplicate node name '{n.name}'")
        seen.add(n.name)
    models: set[str] = set()
    for d in demands:
        if d.model in models:
            raise ValueError(f"models: '{d.model}' is demanded twice; merge the replica counts")
        models.add(d.model)
