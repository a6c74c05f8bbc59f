"""The GPU deployment's files, generated from one GPUCluster (deploy/gpu/cluster.yaml).

- the Serve config (deploy/ray/gpu-multinode.yaml) for `serve deploy` on a Ray cluster;
- a KubeRay RayService manifest (deploy/kuberay/rayservice.yaml) whose serveConfigV2 is that
  same Serve config, with Ray's token authentication, the mesh credential and the API keys from
  Secrets (deploy/kuberay/secrets.yaml) and the mesh's process environment on every pod.

The head pod runs the control plane (it advertises the GPUCluster's control resource) and
Serve's only proxy, so KubeRay's serve Service, which selects the pods with a healthy proxy,
reaches both the proxy (8000) and the ingress's front door.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from services.deployer.core.gpu_cluster import GPUCluster, gpu_serve_config
from services.deployer.core.serve_config import to_yaml
from shared.rpc.mesh_auth import MESH_TOKEN_ENV
from slomesh.launch.mesh import MESH_PROCESS_ENV, SERVE_HOT_PATH_ENV

RAY_VERSION = "2.60.0"
IMAGE = "ghcr.io/your-org/slomesh:0.1.0"
"""The image deploy/kuberay/Dockerfile builds; replace with your registry's name."""

MESH_SECRET = "slomesh-mesh"
API_KEYS_SECRET = "slomesh-api-keys"
API_KEYS_ENV = "SLOMESH_API_KEYS"
RAY_AUTH_SECRET = "slomesh-ray-auth"
HF_SECRET = "slomesh-hf-token"
HEAD_CPUS = 8
"""Logical CPUs of the head pod: the control plane's Serve replicas (one CPU each)."""


def serve_config_for(cluster: GPUCluster) -> dict[str, Any]:
    """The Serve config of the GPU deployment; API keys come from API_KEYS_ENV (a Secret)."""
    from services.deployer.deployment import default_serve_options

    if "api_keys" not in cluster.ingress_args:
        ingress_args = {
            **cluster.ingress_args,
            "api_keys": {"keys_env": API_KEYS_ENV, "required": True},
        }
        cluster = cluster.model_copy(update={"ingress_args": ingress_args})
    return gpu_serve_config(cluster, default_serve_options())


def pod_env() -> list[dict[str, Any]]:
    """The environment of every Ray container: the mesh's process settings and the secrets."""
    env: list[dict[str, Any]] = [
        {"name": k, "value": v} for k, v in {**MESH_PROCESS_ENV, **SERVE_HOT_PATH_ENV}.items()
    ]
    env += [
        _secret_env(MESH_TOKEN_ENV, MESH_SECRET, MESH_TOKEN_ENV),
        _secret_env(API_KEYS_ENV, API_KEYS_SECRET, API_KEYS_ENV),
        _secret_env("HF_TOKEN", HF_SECRET, "HF_TOKEN", optional=True),
    ]
    return env


def _secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _container(name: str, env: list[dict[str, Any]], resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "env": env,
        "resources": {"limits": resources, "requests": resources},
    }


def rayservice(cluster: GPUCluster, serve_yaml: str) -> dict[str, Any]:
    """The RayService object (a plain dict) running `serve_yaml` on `cluster`'s pods."""
    env = pod_env()
    head = _container("ray-head", env, {"cpu": str(HEAD_CPUS), "memory": "32Gi"})
    head["ports"] = [
        {"containerPort": 6379, "name": "gcs-server"},
        {"containerPort": 8265, "name": "dashboard"},
        {"containerPort": 8000, "name": "serve"},
        {"containerPort": cluster.front_door_port, "name": "front-door"},
        {"containerPort": 9000, "name": "grpc"},
        {"containerPort": 8080, "name": "metrics"},
    ]
    gpu_cpus = 4 * cluster.gpus_per_node
    worker = _container(
        "ray-worker",
        env,
        {"cpu": str(gpu_cpus), "memory": f"{32 * cluster.gpus_per_node}Gi",
         "nvidia.com/gpu": str(cluster.gpus_per_node)},
    )  # fmt: skip
    control = json.dumps({cluster.control_resource: 1000})
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "slomesh"},
        "spec": {
            "upgradeStrategy": {"type": "NewCluster"},
            "serveService": {
                "metadata": {"name": "slomesh-serve"},
                "spec": {
                    "ports": [
                        {"name": "serve", "port": 8000, "targetPort": 8000},
                        {
                            "name": "front-door",
                            "port": cluster.front_door_port,
                            "targetPort": cluster.front_door_port,
                        },
                    ]
                },
            },
            "serveConfigV2": serve_yaml,
            "rayClusterConfig": {
                "rayVersion": RAY_VERSION,
                "authOptions": {"mode": "token", "secretName": RAY_AUTH_SECRET},
                "headGroupSpec": {
                    "rayStartParams": {
                        "num-cpus": str(HEAD_CPUS),
                        "num-gpus": "0",
                        "resources": f"'{control}'",
                        "metrics-export-port": "8080",
                        "dashboard-host": "0.0.0.0",
                    },
                    "template": {"spec": {"containers": [head]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": cluster.nodes,
                        "minReplicas": cluster.nodes,
                        "maxReplicas": cluster.nodes,
                        "rayStartParams": {"metrics-export-port": "8080"},
                        "template": {"spec": {"containers": [worker]}},
                    }
                ],
            },
        },
    }


def render(cluster_file: Path) -> tuple[str, str]:
    """(the Serve config YAML, the RayService manifest YAML) generated from `cluster_file`."""
    cluster = GPUCluster.model_validate(yaml.safe_load(cluster_file.read_text()))
    serve_yaml = to_yaml(serve_config_for(cluster))
    header = f"# Generated from {cluster_file.as_posix()} by `slomesh gpu-config`; do not edit.\n"
    serve_header = header + (
        "# On a Ray cluster: GPU nodes install vLLM's CUDA build (pip install vllm==0.32.0);\n"
        "# the head advertises the control-plane resource:\n"
        f"#   ray start --head --resources='{{\"{cluster.control_resource}\": 1000}}'\n"
        "# and every node exports the environment of docs/operations/ray-cluster.md first.\n"
    )
    manifest_header = header + (
        "# Apply the Secrets first (deploy/kuberay/secrets.yaml), then this file; the image is\n"
        "# built from deploy/kuberay/Dockerfile. See docs/operations/kubernetes.md.\n"
    )
    manifest = yaml.dump(
        rayservice(cluster, serve_yaml), Dumper=_LiteralDumper, sort_keys=False, width=100
    )
    return serve_header + serve_yaml, manifest_header + manifest


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (serveConfigV2) as YAML block literals, readable in the manifest;
    no anchors or aliases (each container's env written out)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str)
