"""bench-agree's live mesh with several copies of the shipped vLLM replica (`with_replicas`):
each copy named and listed for the scheduler, and no two engines pinned to the same CPUs."""

from __future__ import annotations

from typing import Any

from slomesh.cli.bench_agree_live import with_replicas
from slomesh.launch import mesh


def _replicas(config: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in config["applications"] if a["name"].startswith("replica-")]


def test_copies_are_named_listed_and_unpinned() -> None:
    shipped = mesh.load_config(mesh.CONFIGS["vllm"])
    two = with_replicas(shipped, 2)
    assert [a["name"] for a in _replicas(two)] == ["replica-0", "replica-1"]
    sched = next(a for a in two["applications"] if a["name"] == "scheduler")
    assert [r["application"] for r in sched["args"]["replicas"]] == ["replica-0", "replica-1"]
    assert all("engine_cpus" not in a["args"]["vllm"] for a in _replicas(two))


def test_one_copy_keeps_the_shipped_settings() -> None:
    shipped = mesh.load_config(mesh.CONFIGS["vllm"])
    one = with_replicas(shipped, 1)
    assert _replicas(one)[0]["args"]["vllm"] == _replicas(shipped)[0]["args"]["vllm"]
    assert with_replicas(shipped, None) is shipped
