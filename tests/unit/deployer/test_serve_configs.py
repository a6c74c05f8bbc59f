"""Every Serve config we ship (and the deployer emits) is valid for `serve deploy`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from services.deployer.core.model import ModelDemand, Node, PlanOptions
from services.deployer.core.planners import plan
from services.deployer.core.serve_config import serve_config
from services.deployer.deployment import default_serve_options

CONFIGS = sorted(Path(__file__).resolve().parents[3].joinpath("deploy", "ray").glob("*.yaml"))


def test_serve_configs_exist() -> None:
    assert {p.name for p in CONFIGS} >= {"local.yaml", "local-simulated.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_serve_config_validates(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    schema = ServeDeploySchema.model_validate(data)
    names = [a.name for a in schema.applications]
    assert len(names) == len(set(names))
    prefixes = [a.route_prefix for a in schema.applications]
    assert all(prefixes) and len(prefixes) == len(set(prefixes))  # gRPC proxy needs prefixes


def test_deployer_emitted_config_validates() -> None:
    nodes = [Node("gpu-0", "A100-80GB", 8), Node("gpu-1", "A100-80GB", 8)]
    demands = [ModelDemand("llama-2-70b", 2), ModelDemand("llama-3.1-8b", 4)]
    result = plan(nodes, demands, "vllm", PlanOptions())
    assert not result.unplaced
    data = serve_config(result, default_serve_options())
    schema = ServeDeploySchema.model_validate(data)
    assert {a.name for a in schema.applications} >= {"ingress", "scheduler", "replica-0"}
