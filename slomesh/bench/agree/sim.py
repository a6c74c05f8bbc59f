"""The simulated side of `bench-agree`: the same requests on N simulated instances that run a
measured profile (the tiny CPU model's is not in the roofline catalogue).

`Simulator` takes its instance profiles from the catalogue, so `ProfiledSimulator` builds it on a
catalogued stand-in and then replaces every instance with one running `profile` (same engine
config, same names); the global policy first looks at the instances at the first arrival, so it
only ever sees the replaced ones. A profile's submit overhead (the live hops before an engine
sees a request, calibrate.py) delays each request's arrival at the simulated scheduler; records
are dated from when it was sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.qlm.rwt_error import ScoredWait
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from slomesh.bench.agree.calibrate import shift_in, shift_out
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.instance import SimInstance
from slomesh.sim.simulator import Simulator, engine_scorpio
from slomesh.stacks import StackConfig

_STAND_IN = InstanceSpec(gpu="A100-80GB", models=["llama-3.1-8b"], tensor_parallel=1)


class ProfiledSimulator(Simulator):
    """A Simulator whose `replicas` instances all serve `profile.model` with `profile`."""

    def __init__(
        self,
        profile: HardwareProfile,
        replicas: int,
        engine: EngineConfig,
        stack: StackConfig,
        requests: Sequence[Request],
    ) -> None:
        cluster = ClusterSpec(
            instances=[_STAND_IN.model_copy(update={"count": replicas})], engine=engine
        )
        super().__init__(cluster, stack, requests)
        config = cluster.engine.model_copy(
            update={
                "queue_policy": stack.queue_policy,
                "mode": stack.engine_mode,
                "preemption_mode": stack.preemption_mode,
                "scorpio": engine_scorpio(stack.scorpio),
            }
        )
        self.replace_instances(
            [
                SimInstance(
                    f"i{k}-{profile.gpu}",
                    profile.gpu,
                    {profile.model: profile},
                    config,
                    profile.model,
                )
                for k in range(replicas)
            ]
        )


@dataclass(frozen=True)
class SimRun:
    records: list[RequestRecord]
    scored_waits: list[ScoredWait]
    """The QLM estimator's scored predictions (empty for other policies)."""
    policy: GlobalPolicy


def simulate(
    profile: HardwareProfile,
    replicas: int,
    engine: EngineConfig,
    stack: StackConfig,
    requests: Sequence[Request],
) -> SimRun:
    overhead = profile.submit_overhead_s
    sim = ProfiledSimulator(profile, replicas, engine, stack, shift_in(requests, overhead))
    result = sim.run()
    tracker = getattr(sim.global_policy, "rwt_error", None)
    scored = list(tracker.scored()) if tracker is not None else []
    return SimRun(shift_out(result.records, overhead), scored, sim.global_policy)
