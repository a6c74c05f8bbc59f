"""The helr-he / helr-lr planners (UELLM Algorithm 2): inventory, several
models largest first, unplaced rules, layer partitions, registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from services.deployer.core import (
    PLANNERS,
    GPUConfig,
    HELRParams,
    Inventory,
    InventoryNode,
    ModelDemand,
    Node,
    PlanOptions,
    plan,
)
from services.deployer.core.helr_planner import inventory_from_nodes
from shared.policy import UnknownNameError
from shared.profiles import model_spec

EXAMPLE = Path(__file__).resolve().parents[3] / "deploy" / "ray" / "inventory" / "example.yaml"
A100, A10 = "A100-80GB", "A10-24GB"


def inv(*nodes: tuple[str, list[GPUConfig]], **kw: object) -> Inventory:
    return Inventory.model_validate(
        {"nodes": [InventoryNode(name=n, gpus=tuple(g)) for n, g in nodes], **kw}
    )


def helr(name: str, inventory: Inventory | None = None, **params: object) -> PlanOptions:
    return PlanOptions(planner=name, inventory=inventory, helr=HELRParams.model_validate(params))


def test_registry_lists_helr_and_unknown_names_list_valid_ones() -> None:
    assert PLANNERS.names() == ["first-fit", "helr-he", "helr-lr"]
    with pytest.raises(UnknownNameError, match="valid: first-fit, helr-he, helr-lr"):
        plan([], [], "vllm", PlanOptions(planner="helr"))


@pytest.mark.parametrize("name", ["helr-he", "helr-lr"])
def test_models_go_largest_first_on_the_remaining_gpus(name: str) -> None:
    nodes = [Node("a", A100, 4), Node("b", A10, 4)]
    demands = [ModelDemand("llama-3.1-8b", 1), ModelDemand("llama-2-70b", 2)]
    p = plan(nodes, demands, "vllm", helr(name))
    assert [pl.model for pl in p.placements] == ["llama-2-70b", "llama-2-70b", "llama-3.1-8b"]
    used = [(n, g) for pl in p.placements for n, g in zip(pl.stage_nodes, pl.gpu_ids, strict=True)]
    assert len(used) == len(set(used))  # no GPU twice
    assert p.placements[0].stage_nodes == ("a", "a") and p.placements[0].layer_partition == (41, 39)
    for pl in p.placements:
        assert sum(pl.layer_partition) == model_spec(pl.model).layers
        assert pl.pipeline_parallel == len(pl.layer_partition) == len(pl.gpu_ids)
        assert pl.tensor_parallel == 1 and pl.node == pl.stage_nodes[0]
    assert [pl.application for pl in p.placements] == ["replica-0", "replica-1", "replica-2"]
    assert p.planner == name and not p.unplaced


@pytest.mark.parametrize(
    ("nodes", "demand", "options", "placed", "rule"),
    [
        ([Node("a", A100, 3)], ModelDemand("llama-2-70b", 2), helr("helr-lr"), 1, "memory rule"),
        ([Node("a", A100, 1)], ModelDemand("tiny", 1), helr("helr-he"), 0, "model rule"),
        ([], ModelDemand("llama-3.1-8b", 1), helr("helr-he"), 0, "free-gpus rule"),
        (
            [Node("a", A10, 2)],
            ModelDemand("llama-3.1-8b", 1),
            helr("helr-lr", kv_reserve_bytes=24 * 10**9),
            0,
            "layer-fits rule",
        ),
        (
            [Node("a", A10, 8)],
            ModelDemand("llama-2-70b", 1),
            helr("helr-lr", kv_reserve_bytes=4 * 10**9, max_dp_gpus=4),
            0,
            "dp-size rule",
        ),
    ],
)
def test_unplaced_replicas_name_the_rule(
    nodes: list[Node], demand: ModelDemand, options: PlanOptions, placed: int, rule: str
) -> None:
    p = plan(nodes, [demand], "vllm", options)
    assert len(p.placements) == placed
    (line,) = p.unplaced
    assert line.startswith(f"{demand.model}: {demand.replicas - placed} of {demand.replicas}")
    assert f"({rule}: " in line


def test_lr_trades_gpus_for_latency_where_he_does_not() -> None:
    """One slow big GPU (holds all of the 8B model) and two fast small ones."""
    inventory = inv(
        ("big", [GPUConfig(type="slow", memory_bytes=40 * 10**9, speed_bytes_s=0.3e12)]),
        ("fast", [GPUConfig(type="fast", count=2, memory_bytes=18 * 10**9, speed_bytes_s=3e12)]),
    )
    demands = [ModelDemand("llama-3.1-8b", 1)]
    he = plan([], demands, "vllm", helr("helr-he", inventory)).placements[0]
    lr = plan([], demands, "vllm", helr("helr-lr", inventory)).placements[0]
    assert (he.stage_nodes, he.pipeline_parallel) == (("big",), 1)
    assert (lr.stage_nodes, lr.pipeline_parallel) == (("fast", "fast"), 2)
    assert lr.latency_s is not None and he.latency_s is not None
    assert lr.latency_s < he.latency_s
    # a1/a2 overrides: LR's planner with a1 = 0 behaves as HE
    forced = plan([], demands, "vllm", helr("helr-lr", inventory, a1=0.0)).placements[0]
    assert forced.stage_nodes == ("big",)


def test_example_inventory_plans_every_demand() -> None:
    inventory = Inventory.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    assert len(inventory.gpus()) == 7
    demands = [ModelDemand("llama-2-70b", 1), ModelDemand("llama-3.1-8b", 2)]
    p = plan([], demands, "vllm", helr("helr-lr", inventory))
    assert not p.unplaced and len(p.placements) == 3


def test_nodes_select_part_of_the_inventory() -> None:
    inventory = inv(("a", [GPUConfig(type=A100, count=2)]), ("b", [GPUConfig(type=A100)]))
    p = plan(
        [Node("b", A100, 1)], [ModelDemand("llama-3.1-8b", 3)], "vllm", helr("helr-he", inventory)
    )
    assert [pl.node for pl in p.placements] == ["b"]
    assert "free-gpus rule" in p.unplaced[0]
    with pytest.raises(ValueError, match=r"node .c. is not in plan_options\.inventory"):
        plan([Node("c", A100, 1)], [], "vllm", helr("helr-he", inventory))
    with pytest.raises(ValueError, match=r"node .a. has 4 GPUs, plan_options\.inventory lists 2"):
        plan([Node("a", A100, 4)], [], "vllm", helr("helr-he", inventory))


def test_inventory_from_nodes_skips_cpu_nodes() -> None:
    got = inventory_from_nodes([Node("g", A100, 2), Node("c", "cpu", 0), Node("e", A10, 0)])
    assert [g.id for g in got.gpus()] == ["g/0", "g/1"]
    assert got.gpus()[0].memory_bytes == 80 * 10**9


def test_link_latencies_defaults_matrix_and_overrides() -> None:
    two = [GPUConfig(type=A100, count=2)]
    base = inv(("a", two), ("b", [GPUConfig(type=A100)]))
    lat = base.latency_matrix()
    assert lat[0, 1] == 1e-5 and lat[0, 2] == lat[2, 1] == 1e-4 and lat[0, 0] == 0.0
    matrix = [[0.0, 1.0, 2.0], [3.0, 0.0, 4.0], [5.0, 6.0, 0.0]]
    pair = {"a": "a/0", "b": "b/0", "latency_s": 7.0}
    over = inv(("a", two), ("b", [GPUConfig(type=A100)]), link_latency_s=matrix, links=[pair])
    got = over.latency_matrix()
    assert got[1, 0] == 3.0 and got[0, 2] == got[2, 0] == 7.0  # matrix, then the pair override


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"nodes": [{"name": "a", "gpus": [{"type": "L40S"}]}]}, "give memory_bytes and speed"),
        ({"nodes": [{"name": "a"}, {"name": "a"}]}, "duplicate node name"),
        (
            {"nodes": [{"name": "a", "gpus": [{"type": A100}]}], "link_latency_s": [[0, 1]]},
            "must be 1x1",
        ),
        (
            {
                "nodes": [{"name": "a", "gpus": [{"type": A100}]}],
                "links": [{"a": "a/0", "b": "a/1", "latency_s": 1}],
            },
            "unknown GPU 'a/1'",
        ),
        ({"nodes": [{"name": "a", "gpus": [{"type": A100, "count": 0}]}]}, "count"),
    ],
)
def test_bad_inventories_are_refused(data: dict[str, object], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        Inventory.model_validate(data)
