"""The simulator with an autoscaler: replicas start after their start-up time and drain on stop."""

from __future__ import annotations

import pytest

from services.scheduler.core.autoscale.config import AutoscaleConfig
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec, generate
from slomesh.sim.autoscale import AutoscaledSimulator
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.stacks import STACKS

MODEL = "llama-3.1-8b"
CLUSTER = ClusterSpec(instances=[InstanceSpec(gpu="A100-80GB", models=[MODEL])])


def _requests(n: int = 300, rate: float = 10.0) -> list:
    lengths = LengthSpec(source="fixed", input_tokens=200, output_tokens=40, max_tokens=64)
    stream = StreamSpec(
        name="s", slo_class="interactive", models=[MODEL], rate_rps=rate, lengths=lengths
    )
    return generate(WorkloadSpec(streams=[stream], requests=n), 0)


def _sim(fields: dict, initial: int) -> AutoscaledSimulator:
    cfg = AutoscaleConfig.model_validate({"startup_overhead_s": 0.0, **fields})
    return AutoscaledSimulator(CLUSTER, STACKS.create("edf"), _requests(), cfg, initial)


def test_started_replicas_serve_only_after_their_start_up_time() -> None:
    sim = _sim({"policy": "fixed", "fixed": {"replicas": 3}}, initial=1)
    run = sim.run()
    assert len(run.records) == 300 and all(r.finished for r in run.records)
    assert [(e.time_s, e.replicas_from, e.replicas_to) for e in sim.log.events] == [(10.0, 1, 3)]
    ready_s = 10.0 + sim.startup_s  # 8 s: the profile's cold load of the weights
    new = [r for r in run.records if r.instance not in (None, "i0-A100-80GB")]
    assert new, "the started replicas served nothing"
    assert min(r.first_token_s or 0.0 for r in new) >= ready_s
    starts = sorted(s for s, _ in sim.log.lifetimes.values())
    assert starts == [0.0, 10.0, 10.0]


def test_stopped_replicas_drain_and_are_released() -> None:
    sim = _sim({"policy": "fixed", "fixed": {"replicas": 1}}, initial=3)
    run = sim.run()
    assert len(run.records) == 300 and all(r.finished for r in run.records)
    assert [(e.replicas_from, e.replicas_to) for e in sim.log.events] == [(3, 1)]
    released = sorted(r for _, r in sim.log.lifetimes.values() if r is not None)
    assert len(released) == 3  # the two drained ones, and the last at the end of the run
    end = released[-1]
    assert released[0] < end and released[1] < end
    assert sim.log.replica_hours(end) < 3 * end / 3600


def test_queueing_stacks_are_refused() -> None:
    cfg = AutoscaleConfig(policy="fixed")
    with pytest.raises(ValueError, match="routing stacks only"):
        AutoscaledSimulator(CLUSTER, STACKS.create("qlm"), _requests(10), cfg, 1)
