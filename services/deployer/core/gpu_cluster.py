"""A GPU cluster stated once: models, replicas per model and GPUs per replica, to a Serve config.

`GPUCluster` is what an operator writes (deploy/gpu/cluster.yaml): the worker nodes (count, GPU
type, GPUs each) and, per model, its checkpoint, replica count and GPUs per replica (vLLM's
tensor parallel size). `gpu_plan` places the replicas on the nodes first-fit in the order given
(one "replica-<k>" application each, its GPUs on one node); `gpu_serve_config` renders the Serve
config with serve_config and finalize, then pins the control-plane applications to the nodes
that advertise `control_resource` (the head node), so the GPU nodes hold only replicas and one
address serves the OpenAI API: Serve's proxy runs on the head only (`proxy_location: HeadOnly`)
and the ingress's front door binds every interface of it. The replicas' and the scheduler's own
gRPC servers bind their node's address (`grpc_host: node`), not loopback: their callers (the
ingress and scheduler on the head, replicas pushing their state) run on other nodes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.deployer.core.finalize import finalize
from services.deployer.core.model import Placement, Plan
from services.deployer.core.serve_config import SERVICES, ServeOptions, serve_config


class ModelReplicas(BaseModel):
    """One served model: what vLLM loads, how many replicas, how many GPUs each."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """Served model name: what clients send as `model`."""

    checkpoint: str | None = None
    """Path or hub name vLLM loads; None: the served name."""

    replicas: int = Field(ge=1)
    """vLLM replicas of this model (one Serve application each)."""

    gpus_per_replica: int = Field(1, ge=1)
    """GPUs of one replica, all on one node: vLLM's tensor parallel size."""

    max_model_len: int = Field(4096, ge=1)
    """Context length in tokens, enforced by the ingress and passed to vLLM."""


class GPUCluster(BaseModel):
    """The GPU deployment, stated once; the Serve config and the KubeRay manifest follow."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    gpu: str = Field(min_length=1)
    """GPU type of the worker nodes, a catalogue name (e.g. "H100-80GB")."""

    nodes: int = Field(ge=1)
    """GPU worker nodes (KubeRay: pods of the GPU worker group)."""

    gpus_per_node: int = Field(ge=1)
    """GPUs of each worker node."""

    models: tuple[ModelReplicas, ...] = Field(min_length=1)
    """The served models, placed in this order."""

    ingress_replicas: int = Field(2, ge=1)
    """Serve replicas of the ingress (each serves the front door on the head node)."""

    front_door_port: int = Field(8100, ge=1, le=65535)
    """Port of the ingress's own OpenAI server (the front door) on the head node."""

    control_resource: str = Field("slomesh-control", min_length=1)
    """Custom Ray resource the head node advertises; every control-plane application takes
    `control_units_per_app` of it, so they all run on the head."""

    control_units_per_app: float = Field(1.0, gt=0.0)
    """Units of `control_resource` one control-plane Serve replica takes."""

    ingress_args: dict[str, Any] = Field(default_factory=dict)
    """Extra args of the ingress application (e.g. `api_keys`, `tenancy`, `slo`)."""

    scheduler_args: dict[str, Any] = Field(default_factory=dict)
    """Extra args of the scheduler application (e.g. `policy`, `max_queue_wait_ms`)."""

    @model_validator(mode="after")
    def _names_unique(self) -> GPUCluster:
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"models: names must be unique; repeated: {', '.join(dupes)}")
        return self


Engine = Literal["vllm", "simulated"]
NODE_ADDRESS = "node"
"""`grpc_host` binding a service's own gRPC server to its Ray node's IP (own_server.bind_host)."""


def gpu_plan(cluster: GPUCluster, engine: Engine = "vllm") -> Plan:
    """Every replica of every model on the first node with enough free GPUs, in order.

    Raises ValueError naming the model when a replica fits on no node."""
    free = [cluster.gpus_per_node] * cluster.nodes
    placements: list[Placement] = []
    for m in cluster.models:
        if m.gpus_per_replica > cluster.gpus_per_node:
            raise ValueError(
                f"models.{m.name}.gpus_per_replica: {m.gpus_per_replica} GPUs do not fit on "
                f"one node (gpus_per_node is {cluster.gpus_per_node})"
            )
        for k in range(m.replicas):
            node = next((i for i, f in enumerate(free) if f >= m.gpus_per_replica), None)
            if node is None:
                raise ValueError(
                    f"models.{m.name}.replicas: replica {k + 1} of {m.replicas} needs "
                    f"{m.gpus_per_replica} GPUs on one node and no node has them left "
                    f"({cluster.nodes} nodes x {cluster.gpus_per_node} GPUs)"
                )
            first = cluster.gpus_per_node - free[node]
            free[node] -= m.gpus_per_replica
            placements.append(
                Placement(
                    application=f"replica-{len(placements)}",
                    node=f"gpu-node-{node}",
                    gpu=cluster.gpu,
                    model=m.name,
                    tensor_parallel=m.gpus_per_replica,
                    gpu_ids=tuple(range(first, first + m.gpus_per_replica)),
                )
            )
    return Plan(placements=tuple(placements), unplaced=(), engine=engine, planner="gpu-cluster")


def gpu_serve_config(
    cluster: GPUCluster, options: ServeOptions, engine: Engine = "vllm"
) -> dict[str, Any]:
    """The Serve config (a plain dict) for `cluster` (module docstring)."""
    options = options.model_copy(
        update={
            "proxy_location": "HeadOnly",
            "ingress": options.ingress.model_copy(
                update={"num_replicas": cluster.ingress_replicas}
            ),
        }
    )
    config = serve_config(gpu_plan(cluster, engine), options)
    checkpoints = {m.name: m.checkpoint for m in cluster.models if m.checkpoint}
    config = finalize(config, checkpoints, {m.name: m.max_model_len for m in cluster.models})
    pin = {cluster.control_resource: cluster.control_units_per_app}
    for app in config["applications"]:
        if app["name"] not in SERVICES:
            app["args"].setdefault("grpc_host", NODE_ADDRESS)
            continue
        for dep in app["deployments"]:
            dep["ray_actor_options"]["resources"] = dict(pin)
        if app["name"] == "ingress":
            app["args"]["front_door"] = {"host": "0.0.0.0", "port": cluster.front_door_port}
            app["args"].update(cluster.ingress_args)
        if app["name"] == "scheduler":
            app["args"].update(cluster.scheduler_args)
            app["args"].setdefault("grpc_host", NODE_ADDRESS)
    return config
