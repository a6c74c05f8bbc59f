"""The GPU deployment: deploy/gpu/cluster.yaml generates the Serve config and the KubeRay
RayService manifest; the manifest's serveConfigV2 passes the loader `slomesh up` uses, Ray
Serve's schema and every application's own args model, and every pod gets the mesh's process
environment and its secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from ray.serve.schema import ServeDeploySchema

from services.deployer.core.gpu_cluster import GPUCluster, ModelReplicas, gpu_plan, gpu_serve_config
from services.deployer.deployment import DeployerArgs, default_serve_options
from services.ingress.args import IngressArgs
from services.predictor.deployment import PredictorArgs
from services.profiler.deployment import ProfilerArgs
from services.replica.args import ReplicaArgs
from services.scheduler.args import SchedulerArgs
from shared.rpc.mesh_auth import MESH_TOKEN_ENV
from slomesh.kuberay import render
from slomesh.launch.mesh import MESH_PROCESS_ENV, SERVE_HOT_PATH_ENV, load_config

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "deploy" / "gpu" / "cluster.yaml"
SERVE = ROOT / "deploy" / "ray" / "gpu-multinode.yaml"
KUBERAY = ROOT / "deploy" / "kuberay"
ARGS: dict[str, type[BaseModel]] = {
    "services.ingress.deployment:build_app": IngressArgs,
    "services.predictor.deployment:build_app": PredictorArgs,
    "services.profiler.deployment:build_app": ProfilerArgs,
    "services.scheduler.deployment:build_app": SchedulerArgs,
    "services.deployer.deployment:build_app": DeployerArgs,
    "services.replica.deployment:build_app": ReplicaArgs,
}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    data = yaml.safe_load((KUBERAY / "rayservice.yaml").read_text())
    assert data["kind"] == "RayService"
    return dict(data)


@pytest.fixture(scope="module")
def embedded(manifest: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("kuberay") / "serve.yaml"
    path.write_text(manifest["spec"]["serveConfigV2"])
    return load_config(path)


def test_generated_files_are_current() -> None:
    serve_yaml, rayservice_yaml = render(CLUSTER.relative_to(ROOT))
    assert SERVE.read_text() == serve_yaml, "run `slomesh gpu-config`"
    assert (KUBERAY / "rayservice.yaml").read_text() == rayservice_yaml, "run `slomesh gpu-config`"


def test_embedded_serve_config_is_the_generated_one(embedded: dict[str, Any]) -> None:
    assert embedded == yaml.safe_load(SERVE.read_text())


def test_embedded_serve_config_validates(
    embedded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = list(yaml.safe_load_all((KUBERAY / "secrets.yaml").read_text()))
    keys = next(d for d in secrets if d["metadata"]["name"] == "slomesh-api-keys")
    monkeypatch.setenv("SLOMESH_API_KEYS", keys["stringData"]["SLOMESH_API_KEYS"])
    schema = ServeDeploySchema.model_validate(embedded)
    assert len({a.name for a in schema.applications}) == len(schema.applications)
    for app in embedded["applications"]:
        ARGS[app["import_path"]].model_validate(app["args"])


def test_replicas_follow_the_cluster_file(embedded: dict[str, Any]) -> None:
    cluster = GPUCluster.model_validate(yaml.safe_load(CLUSTER.read_text()))
    replicas = [a for a in embedded["applications"] if a["name"].startswith("replica-")]
    want = [(m.name, m.gpus_per_replica) for m in cluster.models for _ in range(m.replicas)]
    got = [(a["args"]["model"], a["args"]["tensor_parallel"]) for a in replicas]
    assert got == want
    for app in replicas:
        (dep,) = app["deployments"]
        bundles = dep.get("placement_group_bundles") or [dep["ray_actor_options"]]
        gpus = sum(b.get("GPU", b.get("num_gpus", 0)) for b in bundles)
        assert gpus == app["args"]["tensor_parallel"] <= cluster.gpus_per_node
    checkpoints = {m.name: m.checkpoint for m in cluster.models}
    assert all(a["args"]["vllm"]["model"] == checkpoints[a["args"]["model"]] for a in replicas)
    scheduled = [r["application"] for r in _app(embedded, "scheduler")["args"]["replicas"]]
    assert scheduled == [a["name"] for a in replicas]


def _app(config: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in config["applications"] if a["name"] == name)


def _containers(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    ray = manifest["spec"]["rayClusterConfig"]
    groups = [ray["headGroupSpec"], *ray["workerGroupSpecs"]]
    return [c for g in groups for c in g["template"]["spec"]["containers"]]


def test_every_pod_has_the_mesh_environment_and_secrets(manifest: dict[str, Any]) -> None:
    secrets = {
        d["metadata"]["name"]: set(d["stringData"])
        for d in yaml.safe_load_all((KUBERAY / "secrets.yaml").read_text())
    }
    containers = _containers(manifest)
    assert len(containers) == 2
    for c in containers:
        env = {e["name"]: e for e in c["env"]}
        for name, value in {**MESH_PROCESS_ENV, **SERVE_HOT_PATH_ENV}.items():
            assert env[name]["value"] == value, name
        assert "secretKeyRef" in env[MESH_TOKEN_ENV]["valueFrom"]
        for e in c["env"]:
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                assert ref["key"] in secrets[ref["name"]], ref
    auth = manifest["spec"]["rayClusterConfig"]["authOptions"]
    assert auth["mode"] == "token" and "auth_token" in secrets[auth["secretName"]]


def test_api_keys_and_control_plane_placement(
    manifest: dict[str, Any], embedded: dict[str, Any]
) -> None:
    keys_env = _app(embedded, "ingress")["args"]["api_keys"]["keys_env"]
    assert all(keys_env in {e["name"] for e in c["env"]} for c in _containers(manifest))
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParams"]
    advertised = yaml.safe_load(head["resources"].strip("'"))
    for app in embedded["applications"]:
        if app["name"].startswith("replica-"):
            continue
        (dep,) = app["deployments"]
        assert set(dep["ray_actor_options"]["resources"]) == set(advertised)
    worker = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    cluster = GPUCluster.model_validate(yaml.safe_load(CLUSTER.read_text()))
    limits = worker["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert worker["replicas"] == cluster.nodes
    assert limits["nvidia.com/gpu"] == str(cluster.gpus_per_node)


def _cluster(**models: tuple[int, int]) -> GPUCluster:
    entries = tuple(
        ModelReplicas(name=n, replicas=r, gpus_per_replica=g) for n, (r, g) in models.items()
    )
    return GPUCluster(gpu="H100-80GB", nodes=2, gpus_per_node=4, models=entries)


def test_plan_packs_first_fit_and_names_what_does_not_fit() -> None:
    plan = gpu_plan(_cluster(big=(2, 2), small=(3, 1)))
    assert [(p.node, p.gpu_ids) for p in plan.placements] == [
        ("gpu-node-0", (0, 1)), ("gpu-node-0", (2, 3)),
        ("gpu-node-1", (0,)), ("gpu-node-1", (1,)), ("gpu-node-1", (2,)),
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"models\.small\.replicas: replica 5 of 5"):
        gpu_plan(_cluster(big=(2, 2), small=(5, 1)))
    with pytest.raises(ValueError, match=r"models\.huge\.gpus_per_replica"):
        gpu_plan(_cluster(huge=(1, 8)))
    with pytest.raises(ValueError, match="repeated: a"):
        GPUCluster.model_validate(
            {"gpu": "H100-80GB", "nodes": 1, "gpus_per_node": 1,
             "models": [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 1}]}
        )  # fmt: skip


def test_own_grpc_servers_bind_the_node_address_unless_the_operator_says() -> None:
    """Replicas sit on GPU nodes and push their state to the scheduler on the head; the ingress
    on the head streams from the replicas: a loopback server is out of every caller's reach."""
    options = default_serve_options()
    config = gpu_serve_config(_cluster(big=(2, 2)), options)
    bound = {a["name"]: a["args"].get("grpc_host") for a in config["applications"]}
    assert bound["scheduler"] == "node"
    assert [bound[f"replica-{k}"] for k in range(2)] == ["node", "node"]
    assert bound["ingress"] is None  # its doors are front_door / grpc_door, not an own server
    chosen = _cluster(big=(1, 1)).model_copy(update={"scheduler_args": {"grpc_host": "10.0.0.5"}})
    assert _app(gpu_serve_config(chosen, options), "scheduler")["args"]["grpc_host"] == "10.0.0.5"
