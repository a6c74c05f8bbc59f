"""Model tiers for QLM's swapping on HELR replicas (UELLM Algorithm 2 maps)."""

from __future__ import annotations

import pytest

from services.deployer.core import (
    GPUConfig,
    Inventory,
    InventoryNode,
    ModelDemand,
    PlanOptions,
    plan,
)
from services.deployer.core.tiers import TierPlan, TierReplica, plan_tiers
from shared.profiles import model_spec

GB = 10**9
W = {"big": 60 * GB, "mid": 30 * GB, "small": 10 * GB, "tiny": 5 * GB}


@pytest.mark.parametrize(
    ("replicas", "host", "expected"),
    [
        pytest.param(
            [TierReplica("big", {"a": 1.0}, ("mid", "small", "tiny"))],
            {"a": 40 * GB},
            [TierPlan("big", ("mid", "small"), ("tiny",), 40 * GB)],
            id="fills-in-preference-order",
        ),
        pytest.param(
            [TierReplica("small", {"a": 1.0}, ("big", "mid", "tiny"))],
            {"a": 40 * GB},
            [TierPlan("small", ("mid", "tiny"), ("big",), 40 * GB)],
            id="first-fit-skips-a-model-too-big-for-the-rest",
        ),
        pytest.param(
            [
                TierReplica("big", {"a": 1.0}, ("mid", "small")),
                TierReplica("mid", {"a": 1.0}, ("small",)),
            ],
            {"a": 60 * GB},
            [
                TierPlan("big", ("mid",), ("small",), 30 * GB),
                TierPlan("mid", ("small",), (), 30 * GB),
            ],
            id="node-host-memory-is-shared-equally",
        ),
        pytest.param(
            [TierReplica("big", {"a": 0.5, "b": 0.5}, ("mid", "small"))],
            {"a": 18 * GB, "b": 100 * GB},  # a: 18 GB / 0.5 = 36 GB of whole models
            [TierPlan("big", ("mid",), ("small",), 36 * GB)],
            id="multi-node-replica-needs-its-slice-on-every-node",
        ),
        pytest.param(
            [TierReplica("big", {"a": 1.0}, ("mid",))],
            {},
            [TierPlan("big", (), ("mid",), 0)],
            id="no-host-memory-all-cold",
        ),
    ],
)
def test_plan_tiers(
    replicas: list[TierReplica], host: dict[str, int], expected: list[TierPlan]
) -> None:
    assert plan_tiers(replicas, W, host) == expected


def test_planned_replicas_respect_host_memory() -> None:
    inventory = Inventory(
        nodes=(
            InventoryNode(
                name="a", gpus=(GPUConfig(type="A100-80GB", count=3),), host_memory_bytes=60 * GB
            ),
        )
    )
    demands = [ModelDemand(m, 1) for m in ("llama-2-13b", "llama-3.1-8b", "mistral-7b")]
    p = plan([], demands, "vllm", PlanOptions(planner="helr-he", inventory=inventory))
    assert len(p.placements) == 3
    for pl in p.placements:
        tiers = pl.model_tiers
        assert tiers is not None and tiers.active == pl.model
        assert tiers.host_budget_bytes == 20 * GB  # 60 GB shared by 3 replicas
        assert sum(model_spec(m).weight_bytes for m in tiers.warm) <= tiers.host_budget_bytes
        others = {d.model for d in demands} - {pl.model}
        assert set(tiers.warm) | set(tiers.cold) == others
        assert not set(tiers.warm) & set(tiers.cold)
    # 20 GB: the 13B (26 GB) is never warm; of the 8B (16.1 GB) and the 7B (14.5 GB) the
    # smaller is preferred at equal demand
    warm = {pl.model: pl.model_tiers.warm for pl in p.placements if pl.model_tiers is not None}
    assert warm == {
        "llama-2-13b": ("mistral-7b",),
        "llama-3.1-8b": ("mistral-7b",),
        "mistral-7b": ("llama-3.1-8b",),
    }
