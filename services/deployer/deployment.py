"""The deployer deployment: Plan / Apply / Status over the pure placement planner.

Apply records the desired state and returns its Serve config; the operator (or CI) applies it
with `serve deploy`, so a plan is always reviewable before it changes the cluster.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from ray import serve
from ray.serve import Application

from services.deployer.core.finalize import finalize
from services.deployer.core.model import ModelDemand, Node, PlanOptions
from services.deployer.core.planners import plan
from services.deployer.core.serve_config import AppOptions, ServeOptions, serve_config, to_yaml
from shared.rpc.internal_http import internal_not_found
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import deployer_pb2
from shared.telemetry import TracingConfig, setup_tracing

_SERVICERS = tuple(
    f"shared.rpc.slomesh.v1.{m}_pb2_grpc.add_{s}Servicer_to_server"
    for m, s in (
        ("ingress", "Ingress"),
        ("predictor", "Predictor"),
        ("profiler", "Profiler"),
        ("scheduler", "Scheduler"),
        ("deployer", "Deployer"),
        ("replica", "Replica"),
    )
)


def default_serve_options() -> ServeOptions:
    """Import paths of slomesh's own application builders and servicers."""

    def app(service: str, deployment: str, **kw: Any) -> AppOptions:
        return AppOptions(
            import_path=f"services.{service}.deployment:build_app",
            deployment_name=deployment,
            **kw,
        )

    return ServeOptions(
        ingress=app("ingress", "IngressDeployment", max_ongoing_requests=4096),
        predictor=app("predictor", "PredictorDeployment", max_ongoing_requests=4096),
        profiler=app("profiler", "ProfilerDeployment"),
        scheduler=app("scheduler", "SchedulerDeployment", max_ongoing_requests=4096),
        deployer=app("deployer", "DeployerDeployment"),
        replica=app("replica", "ReplicaDeployment", max_ongoing_requests=1024),
        grpc_servicer_functions=_SERVICERS,
        replicas_arg_for=("scheduler",),
    )


class DeployerArgs(BaseModel):
    """Arguments of the deployer application."""

    model_config = ConfigDict(extra="forbid")

    plan_options: PlanOptions = PlanOptions(cpu_models=("tiny-llama",))
    """Planner name and memory model."""
    checkpoints: dict[str, str] = {}
    """Served model name -> checkpoint (path or hub name) vLLM loads; default: the name."""
    max_model_len: dict[str, int] = {}
    """Served model name -> context length the ingress enforces (default 4096)."""
    tracing: TracingConfig = TracingConfig()
    """Span export."""


def plan_reply(
    request: deployer_pb2.PlanRequest, args: DeployerArgs, serve_options: ServeOptions
) -> deployer_pb2.PlanReply:
    engine: Literal["vllm", "simulated"] = "simulated" if request.engine == "simulated" else "vllm"
    nodes = [Node(n.name, n.gpu, n.gpus) for n in request.nodes]
    demands = [ModelDemand(d.model, d.replicas) for d in request.models]
    result = plan(nodes, demands, engine, args.plan_options)
    config = finalize(serve_config(result, serve_options), args.checkpoints, args.max_model_len)
    return deployer_pb2.PlanReply(
        placements=[
            deployer_pb2.Placement(
                application=p.application,
                node=p.node,
                gpu=p.gpu,
                model=p.model,
                tensor_parallel=p.tensor_parallel,
            )
            for p in result.placements
        ],
        serve_config_yaml=to_yaml(config),
        unplaced=list(result.unplaced),
    )


@serve.deployment(max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.1})
class DeployerDeployment:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = DeployerArgs.model_validate(args)
        setup_tracing("deployer", self.args.tracing)
        self.serve_options = default_serve_options()
        self.applied = deployer_pb2.PlanReply()

    async def __call__(self, request: Any) -> Any:
        """HTTP on this internal application's route prefix: 404 (shared/rpc/internal_http.py)."""
        return internal_not_found("deployer")

    def Plan(
        self, request: deployer_pb2.PlanRequest, grpc_context: Any = None
    ) -> deployer_pb2.PlanReply:
        require_mesh_credential(grpc_context, "deployer.Plan")
        try:
            return plan_reply(request, self.args, self.serve_options)
        except ValueError as err:
            if grpc_context is not None:
                import grpc

                grpc_context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                grpc_context.set_details(str(err))
            return deployer_pb2.PlanReply()

    def Apply(
        self, request: deployer_pb2.PlanRequest, grpc_context: Any = None
    ) -> deployer_pb2.PlanReply:
        require_mesh_credential(grpc_context, "deployer.Apply")
        reply = self.Plan(request, grpc_context)
        if reply.placements:
            self.applied = reply
        return reply

    def Status(
        self, request: deployer_pb2.StatusRequest, grpc_context: Any = None
    ) -> deployer_pb2.PlanReply:
        require_mesh_credential(grpc_context, "deployer.Status")
        return self.applied


def build_app(args: dict[str, Any]) -> Application:
    """Serve application builder (`import_path: services.deployer.deployment:build_app`)."""
    parsed = DeployerArgs.model_validate(args).model_dump(mode="json")
    app: Application = DeployerDeployment.bind(parsed)  # type: ignore[attr-defined]
    return app
