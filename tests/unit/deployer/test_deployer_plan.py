"""First-fit placement: tensor-parallel groups on one node, largest models first, CPU nodes."""

from __future__ import annotations

import pytest

from services.deployer.core import (
    PLANNERS,
    ModelDemand,
    Node,
    Placement,
    PlanOptions,
    plan,
)
from shared.policy import UnknownNameError

A100 = "A100-80GB"
TWO_A100_NODES = [Node("node-a", A100, 8), Node("node-b", A100, 8)]
TINY = PlanOptions(cpu_models=("tiny",))

Row = tuple[str, str, str, int, tuple[int, ...]]  # application, node, model, tp, gpu ids


def rows(placements: tuple[Placement, ...]) -> list[Row]:
    return [(p.application, p.node, p.model, p.tensor_parallel, p.gpu_ids) for p in placements]


@pytest.mark.parametrize(
    ("nodes", "demands", "options", "expected", "unplaced"),
    [
        pytest.param(
            TWO_A100_NODES,
            # listed small first: the 70B (tp 2) still goes first
            [ModelDemand("llama-3.1-8b", 4), ModelDemand("llama-2-70b", 5)],
            PlanOptions(),
            [
                ("replica-0", "node-a", "llama-2-70b", 2, (0, 1)),
                ("replica-1", "node-a", "llama-2-70b", 2, (2, 3)),
                ("replica-2", "node-a", "llama-2-70b", 2, (4, 5)),
                ("replica-3", "node-a", "llama-2-70b", 2, (6, 7)),
                ("replica-4", "node-b", "llama-2-70b", 2, (0, 1)),
                ("replica-5", "node-b", "llama-3.1-8b", 1, (2,)),
                ("replica-6", "node-b", "llama-3.1-8b", 1, (3,)),
                ("replica-7", "node-b", "llama-3.1-8b", 1, (4,)),
                ("replica-8", "node-b", "llama-3.1-8b", 1, (5,)),
            ],
            [],
            id="2x8-A100-70b-and-8b",
        ),
        pytest.param(
            [Node("odd", A100, 3)],
            # the 70B is larger: it takes GPUs 0-1 although listed second; the 8B gets GPU 2
            [ModelDemand("llama-3.1-8b", 1), ModelDemand("llama-2-70b", 1)],
            PlanOptions(),
            [
                ("replica-0", "odd", "llama-2-70b", 2, (0, 1)),
                ("replica-1", "odd", "llama-3.1-8b", 1, (2,)),
            ],
            [],
            id="largest-first-on-a-3-gpu-node",
        ),
        pytest.param(
            [Node("cpu-0", "cpu", 0)],
            [ModelDemand("tiny", 2)],
            TINY,
            [("replica-0", "cpu-0", "tiny", 1, ()), ("replica-1", "cpu-0", "tiny", 1, ())],
            [],
            id="cpu-node-hosts-2-tiny-replicas",
        ),
        pytest.param(
            [Node("gpu", A100, 1), Node("cpu-0", "cpu", 4)],
            [ModelDemand("tiny", 1), ModelDemand("llama-3.1-8b", 2)],
            TINY,
            [
                ("replica-0", "gpu", "llama-3.1-8b", 1, (0,)),
                ("replica-1", "cpu-0", "tiny", 1, ()),
            ],
            ["llama-3.1-8b: 1 of 2 replicas unplaced"],
            id="8b-never-goes-to-a-cpu-node",
        ),
    ],
)
def test_placement_tables(
    nodes: list[Node],
    demands: list[ModelDemand],
    options: PlanOptions,
    expected: list[Row],
    unplaced: list[str],
) -> None:
    p = plan(nodes, demands, "vllm", options)
    assert rows(p.placements) == expected
    assert len(p.unplaced) == len(unplaced)
    for line, start in zip(p.unplaced, unplaced, strict=True):
        assert line.startswith(start)
    assert p.planner == "first-fit" and p.engine == "vllm"


@pytest.mark.parametrize(
    ("nodes", "demand", "options", "placed", "rule"),
    [
        (TWO_A100_NODES, ModelDemand("llama-2-70b", 9), PlanOptions(), 8, "needs 2 free A100-80GB"),
        (
            [Node("a10", "A10-24GB", 4)],
            ModelDemand("llama-2-70b", 1),
            PlanOptions(),
            0,
            "needs tensor_parallel=8 A10-24GB GPUs on one node, node has 4",
        ),
        ([Node("g", A100, 8)], ModelDemand("tiny", 1), TINY, 0, "not in the profile catalog"),
        ([Node("g", "B200", 8)], ModelDemand("llama-3.1-8b", 1), PlanOptions(), 0, "unknown gpu"),
        ([Node("c", "cpu", 0)], ModelDemand("llama-3.1-8b", 1), TINY, 0, "only cpu_models (tiny)"),
        ([Node("c", "cpu", 1)], ModelDemand("tiny", 3), TINY, 1, "all 1 cpu engine slots in use"),
        ([], ModelDemand("tiny", 1), TINY, 0, "no nodes in the inventory"),
    ],
)
def test_unplaceable_demands_name_the_rule(
    nodes: list[Node], demand: ModelDemand, options: PlanOptions, placed: int, rule: str
) -> None:
    p = plan(nodes, [demand], "vllm", options)
    assert len(p.placements) == placed
    assert len(p.unplaced) == 1
    line = p.unplaced[0]
    assert line.startswith(f"{demand.model}: {demand.replicas - placed} of {demand.replicas}")
    assert rule in line


def test_every_node_reports_its_reason() -> None:
    nodes = [Node("full", A100, 1), Node("small", "A10-24GB", 4)]
    p = plan(nodes, [ModelDemand("llama-2-70b", 1)], "simulated")
    (line,) = p.unplaced
    assert "full: needs tensor_parallel=2 A100-80GB GPUs on one node, node has 1" in line
    assert "small: needs tensor_parallel=8 A10-24GB GPUs" in line


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: plan([Node("a", A100, 1)] * 2, [], "vllm"), ValueError, "duplicate node"),
        (
            lambda: plan([], [ModelDemand("m", 1), ModelDemand("m", 2)], "vllm"),
            ValueError,
            "demanded twice",
        ),
        (lambda: plan([], [], "tgi"), ValueError, "engine"),  # type: ignore[arg-type]
        (lambda: Node("a", A100, -1), ValueError, "node.gpus"),
        (lambda: ModelDemand("m", -2), ValueError, "model_demand.replicas"),
        (lambda: plan([], [], "vllm", PlanOptions(planner="helr")), UnknownNameError, "first-fit"),
    ],
)
def test_bad_inputs_are_refused(call: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()  # type: ignore[operator]


def test_planner_registry() -> None:
    assert PLANNERS.names() == ["first-fit", "helr-he", "helr-lr"]
