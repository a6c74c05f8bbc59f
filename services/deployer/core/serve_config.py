"""A plan as a Ray Serve config: the multi-application schema that `serve deploy` accepts.

One application per control-plane service (ingress at "/", then predictor, profiler, scheduler and
deployer at "/<service>") and one "replica-<k>" application per placement at "/replica-<k>".
Import paths, deployment names and gRPC servicer functions come in through ServeOptions, so this
core never imports the shells.

Replica resources: vLLM on a GPU node at tp 1 takes `num_gpus: 1`. At tp > 1 the GPUs are reserved
by a STRICT_PACK placement group of tp bundles {"GPU": 1, "CPU": 1} (vLLM's Ray executor puts one
worker on each bundle) and the replica actor itself takes `num_gpus: 0`: Serve schedules the
replica actor in the first bundle and rejects actor options that are not a subset of it, so the
actor cannot also claim tp GPUs. Simulated replicas and replicas on CPU nodes take no GPU.

Pipeline-parallel replicas (HELR's device maps, pipeline_parallel > 1; see realize.py): one
{"GPU": 1, "CPU": 1} bundle per stage in map order (each pinned to its stage's node when pinning is
on), strategy STRICT_PACK on one node and PACK across nodes, the replica actor at num_gpus 0; the
application's runtime_env sets VLLM_PP_LAYER_PARTITION and the replica args get
`pipeline_parallel`. Placements with model tiers add `model_tiers` to the replica args. Neither
key appears for first-fit placements, whose output is unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from services.deployer.core.model import CPU_DEVICE, Placement, Plan
from services.deployer.core.realize import (
    PP_PARTITION_ENV,
    placement_group_strategy,
    pp_layer_partition,
    stage_bundles,
)

ServiceName = Literal["ingress", "predictor", "profiler", "scheduler", "deployer"]
SERVICES: tuple[ServiceName, ...] = ("ingress", "predictor", "profiler", "scheduler", "deployer")
REPLICA_ARG_KEYS: tuple[str, ...] = (
    "application",
    "model",
    "gpu",
    "engine",
    "tensor_parallel",
    "pipeline_parallel",
    "model_tiers",
)


class AppOptions(BaseModel):
    """One Serve application: where its code lives and how its single deployment runs."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    import_path: str = Field(min_length=1)
    """Application builder, "module.path:attribute" (called with `args`)."""

    deployment_name: str = Field(min_length=1)
    """Name of the deployment inside the application (as the shell's @serve.deployment names it)."""

    num_replicas: int = Field(default=1, ge=1)
    """Serve replicas of this deployment (a "replica-<k>" application always has 1)."""

    max_ongoing_requests: int = Field(default=1000, ge=1)
    """Concurrent requests one Serve replica accepts; always written (Serve's default is 5)."""

    num_cpus: float = Field(default=1.0, ge=0.0)
    """CPUs reserved for each Serve replica actor."""

    args: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments for the application builder (JSON/YAML-able values)."""


class ServeOptions(BaseModel):
    """Everything serve_config needs besides the plan."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    ingress: AppOptions
    """The ingress application (route "/")."""

    predictor: AppOptions
    """The predictor application."""

    profiler: AppOptions
    """The profiler application."""

    scheduler: AppOptions
    """The scheduler application."""

    deployer: AppOptions
    """The deployer application."""

    replica: AppOptions
    """Template of every "replica-<k>" application; its args get the placement's application,
    model, gpu, engine and tensor_parallel (which these args must not set themselves)."""

    grpc_servicer_functions: tuple[str, ...] = ()
    """Import paths of the generated add_XServicer_to_server functions Serve's gRPC proxy
    registers ("module.path:add_PredictorServicer_to_server", ...)."""

    proxy_location: Literal["Disabled", "HeadOnly", "EveryNode"] = "EveryNode"
    """Where Serve runs its HTTP/gRPC proxies."""

    http_host: str = "0.0.0.0"
    """Host the HTTP proxy binds."""

    http_port: int = Field(default=8000, ge=1, le=65535)
    """Port of the HTTP proxy (OpenAI API at the ingress)."""

    grpc_port: int = Field(default=9000, ge=1, le=65535)
    """Port of the gRPC proxy."""

    cpu_replica_num_cpus: float = Field(default=4.0, gt=0.0)
    """CPUs reserved for a vLLM replica on a "cpu" node (the CPU engine computes on them)."""

    replicas_arg_for: tuple[ServiceName, ...] = ()
    """Services whose args get a "replicas" list (application, node, gpu, model,
    tensor_parallel of every placement), e.g. ("scheduler",)."""

    node_resource_prefix: str | None = None
    """When set, each replica is pinned to its planned node through the custom resource
    "<prefix><node name>" (0.001 of it), which the Ray nodes must advertise; None leaves node
    choice to Ray."""


def _replica_ref(p: Placement) -> dict[str, Any]:
    return {
        "application": p.application,
        "node": p.node,
        "gpu": p.gpu,
        "model": p.model,
        "tensor_parallel": p.tensor_parallel,
    }


def _application(
    name: str, route_prefix: str, app: AppOptions, args: dict[str, Any], deployment: dict[str, Any]
) -> dict[str, Any]:
    return {
        "name": name,
        "route_prefix": route_prefix,
        "import_path": app.import_path,
        "args": args,
        "deployments": [
            {
                "name": app.deployment_name,
                "num_replicas": app.num_replicas,
                "max_ongoing_requests": app.max_ongoing_requests,
                **deployment,
            }
        ],
    }


def _replica_deployment(p: Plan, pl: Placement, options: ServeOptions) -> dict[str, Any]:
    """ray_actor_options (and placement group) of one replica (module docstring)."""
    on_cpu_node = pl.gpu == CPU_DEVICE
    uses_gpu = p.engine == "vllm" and not on_cpu_node
    if p.engine == "vllm" and on_cpu_node:
        cpus = options.cpu_replica_num_cpus
    else:
        cpus = options.replica.num_cpus
    actor: dict[str, Any] = {"num_cpus": cpus, "num_gpus": 0}
    out: dict[str, Any] = {"ray_actor_options": actor}
    pin = (
        {f"{options.node_resource_prefix}{pl.node}": 0.001}
        if options.node_resource_prefix is not None
        else {}
    )
    if pin:
        actor["resources"] = dict(pin)
    if uses_gpu and pl.pipeline_parallel > 1:
        if pl.tensor_parallel != 1:
            raise ValueError(f"{pl.application}: pipeline stages must have tensor_parallel 1")
        stage_nodes = pl.stage_nodes or (pl.node,) * pl.pipeline_parallel
        out["placement_group_bundles"] = stage_bundles(
            stage_nodes, cpus, options.node_resource_prefix
        )
        out["placement_group_strategy"] = placement_group_strategy(stage_nodes)
    elif uses_gpu and pl.tensor_parallel == 1:
        actor["num_gpus"] = 1
    elif uses_gpu:
        bundles: list[dict[str, float]] = [{"GPU": 1, "CPU": 1} for _ in range(pl.tensor_parallel)]
        bundles[0] = {"GPU": 1, "CPU": max(1.0, cpus), **pin}
        out["placement_group_bundles"] = bundles
        out["placement_group_strategy"] = "STRICT_PACK"
    return out


def serve_config(plan: Plan, options: ServeOptions) -> dict[str, Any]:
    """The Serve deploy config (a plain dict of lists, dicts and scalars) for `plan`."""
    reserved = sorted(set(options.replica.args) & set(REPLICA_ARG_KEYS))
    if reserved:
        raise ValueError(
            f"options.replica.args must not set {', '.join(reserved)}: the plan sets them"
        )
    replicas = [_replica_ref(pl) for pl in plan.placements]
    apps: list[dict[str, Any]] = []
    for service in SERVICES:
        app: AppOptions = getattr(options, service)
        args = dict(app.args)
        if service in options.replicas_arg_for:
            args["replicas"] = [dict(r) for r in replicas]
        prefix = "/" if service == "ingress" else f"/{service}"
        apps.append(
            _application(
                service, prefix, app, args, {"ray_actor_options": {"num_cpus": app.num_cpus}}
            )
        )
    for pl in plan.placements:
        args = {
            **options.replica.args,
            "application": pl.application,
            "model": pl.model,
            "gpu": pl.gpu,
            "engine": plan.engine,
            "tensor_parallel": pl.tensor_parallel,
        }
        if pl.pipeline_parallel > 1:
            args["pipeline_parallel"] = pl.pipeline_parallel
        if pl.model_tiers is not None:
            args["model_tiers"] = pl.model_tiers.as_args()
        deployment = _replica_deployment(plan, pl, options)
        replica_app = options.replica.model_copy(update={"num_replicas": 1})
        entry = _application(pl.application, f"/{pl.application}", replica_app, args, deployment)
        if pl.pipeline_parallel > 1:
            partition = pp_layer_partition(pl.layer_partition)
            if len(pl.layer_partition) != pl.pipeline_parallel:
                raise ValueError(
                    f"{pl.application}: layer_partition has {len(pl.layer_partition)} stages, "
                    f"pipeline_parallel is {pl.pipeline_parallel}"
                )
            entry["runtime_env"] = {"env_vars": {PP_PARTITION_ENV: partition}}
        apps.append(entry)
    return {
        "proxy_location": options.proxy_location,
        "http_options": {"host": options.http_host, "port": options.http_port},
        "grpc_options": {
            "port": options.grpc_port,
            "grpc_servicer_functions": list(options.grpc_servicer_functions),
        },
        "applications": apps,
    }


def to_yaml(config: dict[str, Any]) -> str:
    """The config as YAML for `serve deploy` (PyYAML safe_dump, keys in their given order)."""
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
