"""The shard rules every shard and ingress computes alike (shared/policy/shards.py): replicas
divided evenly per model with one owner each, a request's shard order by weighted rendezvous
hashing (load follows weights; a shard added takes requests only from the others, a shard
removed gives only its own away), and the config split (`slomesh up --shards N`)."""

from __future__ import annotations

from collections import Counter

import pytest

from shared.policy.shards import divide_replicas, shard_order
from slomesh.launch.shards import shard_names, with_shards

REPLICAS = [(f"r{i}", "llama" if i < 6 else "qwen") for i in range(9)]


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_every_replica_has_one_owner_and_each_shard_an_even_share_per_model(count: int) -> None:
    owned = divide_replicas(REPLICAS, shard_names(count))
    everyone = [app for apps in owned.values() for app in apps]
    assert sorted(everyone) == sorted(app for app, _ in REPLICAS)
    for model, n in (("llama", 6), ("qwen", 3)):
        per_shard = [sum(dict(REPLICAS)[a] == model for a in apps) for apps in owned.values()]
        assert max(per_shard) - min(per_shard) <= 1
        assert sum(per_shard) == n


def test_the_division_is_the_same_whatever_the_order_names_come_in() -> None:
    a = divide_replicas(REPLICAS, ["scheduler-1", "scheduler"])
    b = divide_replicas(list(reversed(REPLICAS)), ["scheduler", "scheduler-1"])
    assert a == b


def test_with_no_live_shard_nobody_owns_anything() -> None:
    assert divide_replicas(REPLICAS, []) == {}


def test_requests_spread_over_shards_by_weight() -> None:
    firsts = Counter(shard_order(f"req-{i}", {"a": 1.0, "b": 3.0})[0] for i in range(4000))
    assert 0.2 < firsts["a"] / 4000 < 0.3
    assert shard_order("x", {"a": 0.0, "b": 1.0}) == ["b", "a"]  # no replica: last


def test_a_shard_added_only_takes_requests_and_a_shard_removed_only_gives_its_own() -> None:
    keys = [f"req-{i}" for i in range(2000)]
    two = {k: shard_order(k, {"s0": 1.0, "s1": 1.0})[0] for k in keys}
    three = {k: shard_order(k, {"s0": 1.0, "s1": 1.0, "s2": 1.0})[0] for k in keys}
    moved = [k for k in keys if two[k] != three[k]]
    assert all(three[k] == "s2" for k in moved)
    assert 0.25 < len(moved) / len(keys) < 0.42
    # the failover order is the order without the failed shard
    for k in keys[:200]:
        assert shard_order(k, {"s0": 1.0, "s1": 1.0, "s2": 1.0})[1:] == [
            s for s in shard_order(k, {"s0": 1.0, "s1": 1.0, "s2": 1.0}) if s != three[k]
        ]
        rest = {s: 1.0 for s in ("s0", "s1", "s2") if s != three[k]}
        assert shard_order(k, rest)[0] == shard_order(k, {"s0": 1.0, "s1": 1.0, "s2": 1.0})[1]


def test_the_config_split_names_the_shards_their_peers_and_the_ingress() -> None:
    config = {
        "applications": [
            {"name": "scheduler", "route_prefix": "/scheduler", "args": {"policy": "qlm"}},
            {"name": "ingress", "args": {"models": [{"name": "m"}]}},
        ]
    }
    out = with_shards(config, 3)
    apps = {a["name"]: a for a in out["applications"]}
    assert [n for n in apps if n.startswith("scheduler")] == shard_names(3)
    assert apps["scheduler-2"]["args"]["shard"] == {
        "name": "scheduler-2",
        "peers": ["scheduler", "scheduler-1"],
    }
    assert apps["scheduler-1"]["route_prefix"] == "/scheduler-1"
    assert apps["scheduler-1"]["args"]["policy"] == "qlm"
    assert apps["ingress"]["args"]["scheduler"] == {"shards": shard_names(3), "discover": True}
    assert "shard" not in config["applications"][0]["args"]  # the input is left as it was
    with pytest.raises(ValueError, match="at least 1"):
        with_shards(config, 0)
