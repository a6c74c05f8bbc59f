"""Replica arguments the deployer emits (HELR pipelines, model tiers) build a working engine."""

from __future__ import annotations

import pytest

from services.deployer.core import ModelDemand, Node, PlanOptions, plan, serve_config
from services.deployer.deployment import default_serve_options
from services.replica.args import ReplicaArgs
from services.replica.build import build_engine
from services.replica.sim_engine import AsyncSimEngine


def _replica_args(planner: str) -> list[dict]:
    nodes = [Node("a", "A100-80GB", 4)]
    demands = [ModelDemand("llama-2-70b", 1), ModelDemand("llama-3.1-8b", 1)]
    p = plan(nodes, demands, "simulated", PlanOptions(planner=planner))
    cfg = serve_config(p, default_serve_options())
    return [a["args"] for a in cfg["applications"] if a["name"].startswith("replica-")]


@pytest.mark.parametrize("planner", ["helr-he", "helr-lr", "first-fit"])
def test_replica_args_of_every_planner_build_a_simulated_engine(planner):
    for raw in _replica_args(planner):
        args = ReplicaArgs.model_validate(raw)
        engine = build_engine(args)
        assert isinstance(engine, AsyncSimEngine)
        tiers = engine.core.tiers
        assert tiers.active == args.model
        if args.model_tiers is not None:
            assert set(tiers.profiles) == {
                args.model,
                *args.model_tiers.warm,
                *args.model_tiers.cold,
            }
            assert set(tiers.warm) == set(args.model_tiers.warm)
            assert tiers.host_model_cache_bytes == args.model_tiers.host_budget_bytes


def test_replica_pipeline_stages_count_as_gpus_for_the_simulated_profile():
    # llama-2-70b does not fit one A100-80GB; over 2 pipeline stages it does
    base = {"engine": "simulated", "model": "llama-2-70b", "gpu": "A100-80GB"}
    with pytest.raises(ValueError, match="llama-2-70b"):
        build_engine(ReplicaArgs.model_validate(base))
    engine = build_engine(ReplicaArgs.model_validate({**base, "pipeline_parallel": 2}))
    assert engine.core.profile.model == "llama-2-70b"


def test_replica_model_tiers_must_start_with_the_served_model():
    raw = {
        "engine": "simulated",
        "model": "llama-3.1-8b",
        "model_tiers": {"active": "llama-2-13b", "host_budget_bytes": 0},
    }
    with pytest.raises(ValueError, match=r"model_tiers\.active must be the replica.s model"):
        build_engine(ReplicaArgs.model_validate(raw))
