"""The Serve config of a plan: applications, routes, gRPC, resources, YAML round trip."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from services.deployer.core import (
    AppOptions,
    ModelDemand,
    Node,
    Plan,
    PlanOptions,
    ServeOptions,
    plan,
    serve_config,
    to_yaml,
)

SERVICERS = (
    "shared.rpc.slomesh.v1.predictor_pb2_grpc:add_PredictorServicer_to_server",
    "shared.rpc.slomesh.v1.profiler_pb2_grpc:add_ProfilerServicer_to_server",
)


def app(service: str, max_ongoing: int) -> AppOptions:
    return AppOptions(
        import_path=f"services.{service}.shell:app",
        deployment_name=service.capitalize(),
        max_ongoing_requests=max_ongoing,
    )


OPTIONS = ServeOptions(
    ingress=app("ingress", 2000),
    predictor=app("predictor", 500),
    profiler=app("profiler", 501),
    scheduler=app("scheduler", 502),
    deployer=app("deployer", 10),
    replica=app("replica", 300).model_copy(update={"args": {"block_size_tokens": 16}}),
    grpc_servicer_functions=SERVICERS,
    grpc_port=9100,
    replicas_arg_for=("scheduler",),
)

MIXED = [Node("gpu-a", "A100-80GB", 8), Node("cpu-0", "cpu", 0)]
DEMANDS = [ModelDemand("llama-2-70b", 2), ModelDemand("llama-3.1-8b", 1), ModelDemand("tiny", 2)]


def mixed_plan(engine: str = "vllm") -> Plan:
    return plan(MIXED, DEMANDS, engine, PlanOptions(cpu_models=("tiny",)))  # type: ignore[arg-type]


def by_name(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in config["applications"]}


def test_applications_and_routes() -> None:
    config = serve_config(mixed_plan(), OPTIONS)
    apps = by_name(config)
    services = ["ingress", "predictor", "profiler", "scheduler", "deployer"]
    replicas = [f"replica-{k}" for k in range(5)]
    assert list(apps) == services + replicas
    routes = [a["route_prefix"] for a in config["applications"]]
    assert len(set(routes)) == len(routes)
    assert apps["ingress"]["route_prefix"] == "/"
    assert apps["replica-3"]["route_prefix"] == "/replica-3"
    assert apps["predictor"]["import_path"] == "services.predictor.shell:app"
    assert config["grpc_options"] == {"port": 9100, "grpc_servicer_functions": list(SERVICERS)}
    assert config["http_options"] == {"host": "0.0.0.0", "port": 8000}
    assert config["proxy_location"] == "EveryNode"


def test_max_ongoing_requests_comes_from_options() -> None:
    apps = by_name(serve_config(mixed_plan(), OPTIONS))
    expected = {"ingress": 2000, "predictor": 500, "profiler": 501, "scheduler": 502}
    expected |= {"deployer": 10} | {f"replica-{k}": 300 for k in range(5)}
    for name, a in apps.items():
        (dep,) = a["deployments"]
        assert dep["max_ongoing_requests"] == expected[name]
        assert dep["num_replicas"] == 1


@pytest.mark.parametrize(
    ("application", "model", "gpu", "tp", "num_gpus", "num_cpus", "bundles"),
    [
        ("replica-0", "llama-2-70b", "A100-80GB", 2, 0, 1.0, 2),
        ("replica-1", "llama-2-70b", "A100-80GB", 2, 0, 1.0, 2),
        ("replica-2", "llama-3.1-8b", "A100-80GB", 1, 1, 1.0, None),
        ("replica-3", "tiny", "cpu", 1, 0, 4.0, None),
        ("replica-4", "tiny", "cpu", 1, 0, 4.0, None),
    ],
)
def test_vllm_replica_resources(
    application: str,
    model: str,
    gpu: str,
    tp: int,
    num_gpus: int,
    num_cpus: float,
    bundles: int | None,
) -> None:
    a = by_name(serve_config(mixed_plan(), OPTIONS))[application]
    assert a["args"] == {
        "block_size_tokens": 16,
        "application": application,
        "model": model,
        "gpu": gpu,
        "engine": "vllm",
        "tensor_parallel": tp,
    }
    (dep,) = a["deployments"]
    assert dep["ray_actor_options"] == {"num_cpus": num_cpus, "num_gpus": num_gpus}
    if bundles is None:
        assert "placement_group_bundles" not in dep
        return
    assert dep["placement_group_bundles"] == [{"GPU": 1, "CPU": 1}] * tp
    assert len(dep["placement_group_bundles"]) == tp
    assert dep["placement_group_strategy"] == "STRICT_PACK"
    # Serve's rule: the replica actor sits in bundle 0 and must fit in it
    first = dep["placement_group_bundles"][0]
    assert dep["ray_actor_options"]["num_gpus"] <= first["GPU"]
    assert dep["ray_actor_options"]["num_cpus"] <= first["CPU"]


def test_simulated_replicas_take_no_gpu_and_no_placement_group() -> None:
    apps = by_name(serve_config(mixed_plan("simulated"), OPTIONS))
    for k in range(5):
        (dep,) = apps[f"replica-{k}"]["deployments"]
        assert dep["ray_actor_options"]["num_gpus"] == 0
        assert "placement_group_bundles" not in dep
        assert apps[f"replica-{k}"]["args"]["engine"] == "simulated"


def test_scheduler_gets_the_replica_list_and_pinning_adds_node_resources() -> None:
    opts = OPTIONS.model_copy(update={"node_resource_prefix": "slomesh-node:"})
    apps = by_name(serve_config(mixed_plan(), opts))
    refs = apps["scheduler"]["args"]["replicas"]
    assert [r["application"] for r in refs] == [f"replica-{k}" for k in range(5)]
    assert refs[0] == {
        "application": "replica-0",
        "node": "gpu-a",
        "gpu": "A100-80GB",
        "model": "llama-2-70b",
        "tensor_parallel": 2,
    }
    assert "replicas" not in apps["ingress"]["args"]
    (dep,) = apps["replica-0"]["deployments"]
    assert dep["ray_actor_options"]["resources"] == {"slomesh-node:gpu-a": 0.001}
    assert dep["placement_group_bundles"][0]["slomesh-node:gpu-a"] == 0.001
    (dep,) = apps["replica-3"]["deployments"]
    assert dep["ray_actor_options"]["resources"] == {"slomesh-node:cpu-0": 0.001}


def test_replica_args_may_not_shadow_the_plan() -> None:
    bad = OPTIONS.model_copy(
        update={"replica": app("replica", 1).model_copy(update={"args": {"model": "x"}})}
    )
    with pytest.raises(ValueError, match="model"):
        serve_config(mixed_plan(), bad)


def test_yaml_round_trip() -> None:
    config = serve_config(mixed_plan(), OPTIONS)
    text = to_yaml(config)
    assert yaml.safe_load(text) == config
    assert text.startswith("proxy_location: EveryNode\n")


def test_config_validates_against_serve_schema() -> None:
    schema = pytest.importorskip("ray.serve.schema")
    replica_config = pytest.importorskip("ray.serve._private.config").ReplicaConfig
    config = serve_config(mixed_plan(), OPTIONS)
    parsed = schema.ServeDeploySchema.model_validate(yaml.safe_load(to_yaml(config)))
    assert len(parsed.applications) == 10
    for a in config["applications"]:
        (dep,) = a["deployments"]
        replica_config.create(  # Serve's own resource/placement-group validation
            "module:attr",
            ray_actor_options=dep["ray_actor_options"],
            placement_group_bundles=dep.get("placement_group_bundles"),
            placement_group_strategy=dep.get("placement_group_strategy"),
        )


def test_serve_options_require_import_paths() -> None:
    with pytest.raises(ValueError, match="import_path"):
        AppOptions.model_validate({"deployment_name": "X"})
