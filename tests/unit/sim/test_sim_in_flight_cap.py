"""The stack's in-flight cap: the peers queue a burst beyond the scheduler's default cap instead
of turning it away, and a stack that sets a cap is held to it (simulated and live alike)."""

from __future__ import annotations

from pathlib import Path

from services.scheduler.args import SchedulerArgs
from shared.domain import Request
from shared.metrics.records import RequestRecord
from slomesh.bench.scenarios import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.scheduler import SimAdmissionConfig
from slomesh.stacks import load_stack
from tests.unit.sim.conftest import simulate, smoke_requests

DEFAULT_CAP = SchedulerArgs.model_fields["max_in_flight_per_replica"].default


def _burst(cluster: ClusterSpec) -> list[Request]:
    """More requests than the default cap of all the cluster's replicas, arriving within a
    fraction of a second."""
    replicas = sum(i.count for i in cluster.instances)
    return smoke_requests(0, rate=4000.0, requests=replicas * DEFAULT_CAP + 100)


def _full(records: list[RequestRecord]) -> int:
    return sum(r.rejected and "in flight" in r.reject_reason for r in records)


def test_peer_stacks_lift_the_in_flight_cap() -> None:
    for name in ("vllm-fcfs", "ray-serve-llm", "ray-serve-llm-prefix", "llm-d"):
        stack = load_stack(name)
        assert stack.max_in_flight_per_replica is not None
        assert stack.max_in_flight_per_replica > 100 * DEFAULT_CAP, name
        assert SimAdmissionConfig.of_stack(stack).max_in_flight_per_replica == (
            stack.max_in_flight_per_replica
        )
    assert SimAdmissionConfig.of_stack(load_stack("slomesh")) == SimAdmissionConfig()


def test_a_burst_past_the_default_cap_queues_at_a_peer(smoke: ScenarioSpec, tmp_path: Path) -> None:
    run = simulate(smoke.cluster, "vllm-fcfs", _burst(smoke.cluster))
    assert _full(run.records) == 0
    capped = tmp_path / "capped.yaml"
    capped.write_text(
        "extends: vllm-fcfs\nname: capped\nstages:\n"
        f"  admitter: {{plugin: none, params: {{max_in_flight_per_replica: {DEFAULT_CAP}}}}}\n"
    )
    run = simulate(smoke.cluster, str(capped), _burst(smoke.cluster))
    assert _full(run.records) > 0
