"""HELR device maps realised in the Serve config (UELLM Algorithm 2):
pipeline stages, VLLM_PP_LAYER_PARTITION, placement-group bundles, model tiers."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from services.deployer.core import (
    AppOptions,
    GPUConfig,
    Inventory,
    InventoryNode,
    ModelDemand,
    Node,
    Plan,
    PlanOptions,
    ServeOptions,
    plan,
    serve_config,
    to_yaml,
)
from services.deployer.core.realize import (
    placement_group_strategy,
    pp_layer_partition,
    vllm_order_problem,
)


def app(service: str) -> AppOptions:
    return AppOptions(import_path=f"services.{service}.shell:app", deployment_name=service)


OPTIONS = ServeOptions(
    ingress=app("ingress"),
    predictor=app("predictor"),
    profiler=app("profiler"),
    scheduler=app("scheduler"),
    deployer=app("deployer"),
    replica=app("replica"),
)
PINNED = OPTIONS.model_copy(update={"node_resource_prefix": "node:"})


def one_node_plan(engine: str = "vllm") -> Plan:
    nodes = [Node("a", "A100-80GB", 4)]
    demands = [ModelDemand("llama-2-70b", 1), ModelDemand("llama-3.1-8b", 1)]
    return plan(nodes, demands, engine, PlanOptions(planner="helr-lr"))  # type: ignore[arg-type]


def two_node_plan() -> Plan:
    inventory = Inventory(
        nodes=(
            InventoryNode(name="a", gpus=(GPUConfig(type="A100-80GB"),)),
            InventoryNode(name="b", gpus=(GPUConfig(type="A100-80GB"),)),
        )
    )
    options = PlanOptions(planner="helr-he", inventory=inventory)
    return plan([], [ModelDemand("llama-2-70b", 1)], "vllm", options)


def replica(config: dict[str, Any], name: str) -> dict[str, Any]:
    (a,) = [a for a in config["applications"] if a["name"] == name]
    return a


def test_pipeline_replica_on_one_node() -> None:
    config = serve_config(one_node_plan(), OPTIONS)
    a = replica(config, "replica-0")
    assert a["args"]["model"] == "llama-2-70b"
    assert a["args"]["tensor_parallel"] == 1 and a["args"]["pipeline_parallel"] == 2
    assert a["runtime_env"] == {"env_vars": {"VLLM_PP_LAYER_PARTITION": "41,39"}}
    assert sum(int(x) for x in a["runtime_env"]["env_vars"]["VLLM_PP_LAYER_PARTITION"].split(","))
    (dep,) = a["deployments"]
    assert dep["placement_group_bundles"] == [{"GPU": 1, "CPU": 1.0}, {"GPU": 1, "CPU": 1}]
    assert dep["placement_group_strategy"] == "STRICT_PACK"
    assert dep["ray_actor_options"] == {"num_cpus": 1.0, "num_gpus": 0}
    assert a["args"]["model_tiers"] == {
        "active": "llama-2-70b",
        "warm": [],
        "cold": ["llama-3.1-8b"],
        "host_budget_bytes": 0,
    }


def test_single_stage_helr_replica_takes_one_gpu_and_no_pp_keys() -> None:
    a = replica(serve_config(one_node_plan(), OPTIONS), "replica-1")
    assert a["args"]["model"] == "llama-3.1-8b"
    assert "pipeline_parallel" not in a["args"] and "runtime_env" not in a
    (dep,) = a["deployments"]
    assert dep["ray_actor_options"]["num_gpus"] == 1 and "placement_group_bundles" not in dep


def test_pipeline_across_nodes_packs_and_pins_each_stage() -> None:
    p = two_node_plan()
    (pl,) = p.placements
    assert pl.stage_nodes == ("a", "b") and sum(pl.layer_partition) == 80
    a = replica(serve_config(p, PINNED), "replica-0")
    (dep,) = a["deployments"]
    assert dep["placement_group_strategy"] == "PACK"
    assert dep["placement_group_bundles"] == [
        {"GPU": 1, "CPU": 1.0, "node:a": 0.001},
        {"GPU": 1, "CPU": 1, "node:b": 0.001},
    ]
    assert dep["ray_actor_options"]["resources"] == {"node:a": 0.001}
    partition = a["runtime_env"]["env_vars"]["VLLM_PP_LAYER_PARTITION"]
    assert partition == ",".join(str(n) for n in pl.layer_partition)


def test_simulated_pipeline_replica_takes_no_gpu() -> None:
    a = replica(serve_config(one_node_plan("simulated"), OPTIONS), "replica-0")
    (dep,) = a["deployments"]
    assert "placement_group_bundles" not in dep and dep["ray_actor_options"]["num_gpus"] == 0
    assert a["args"]["pipeline_parallel"] == 2


def test_first_fit_output_has_no_helr_keys() -> None:
    p = plan([Node("a", "A100-80GB", 4)], [ModelDemand("llama-2-70b", 1)], "vllm")
    a = replica(serve_config(p, OPTIONS), "replica-0")
    assert set(a["args"]) == {"application", "model", "gpu", "engine", "tensor_parallel"}
    assert "runtime_env" not in a


@pytest.mark.parametrize("key", ["pipeline_parallel", "model_tiers"])
def test_replica_args_may_not_shadow_helr_keys(key: str) -> None:
    bad = OPTIONS.model_copy(
        update={"replica": app("replica").model_copy(update={"args": {key: 1}})}
    )
    with pytest.raises(ValueError, match=key):
        serve_config(one_node_plan(), bad)


def test_pipeline_config_validates_against_serve_schema() -> None:
    schema = pytest.importorskip("ray.serve.schema")
    replica_config = pytest.importorskip("ray.serve._private.config").ReplicaConfig
    for p, opts in ((one_node_plan(), OPTIONS), (two_node_plan(), PINNED)):
        config = serve_config(p, opts)
        parsed = schema.ServeDeploySchema.model_validate(yaml.safe_load(to_yaml(config)))
        env = parsed.applications[5].runtime_env["env_vars"]
        assert "VLLM_PP_LAYER_PARTITION" in env
        for a in config["applications"]:
            (dep,) = a["deployments"]
            replica_config.create(
                "module:attr",
                ray_actor_options=dep["ray_actor_options"],
                placement_group_bundles=dep.get("placement_group_bundles"),
                placement_group_strategy=dep.get("placement_group_strategy"),
            )


@pytest.mark.parametrize(
    ("nodes", "problem"),
    [
        (("a", "a", "a"), None),
        (("a", "a", "b"), None),
        (("a", "b", "a"), "not contiguous"),
        (("a", "b", "c", "c"), None),  # later nodes by increasing stage count: vLLM's order
        (("a", "b", "b", "c"), "may be reordered"),
        (("a", "b", "c"), "may be reordered"),  # equal counts: vLLM orders by IP
    ],
)
def test_vllm_stage_order(nodes: tuple[str, ...], problem: str | None) -> None:
    got = vllm_order_problem(nodes)
    assert (got is None) if problem is None else (got is not None and problem in got)


def test_partition_and_strategy_helpers() -> None:
    assert pp_layer_partition([41, 39]) == "41,39"
    with pytest.raises(ValueError, match=">= 1 layer"):
        pp_layer_partition([80, 0])
    assert placement_group_strategy(["a", "a"]) == "STRICT_PACK"
    assert placement_group_strategy(["a", "b"]) == "PACK"
