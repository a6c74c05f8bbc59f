"""The simulated side of `bench-agree`: the same requests on N simulated instances that run a
measured profile (the tiny CPU model's is not in the roofline catalogue).

`Simulator` takes its instance profiles from the catalogue, so `ProfiledSimulator` builds it on a
catalogued stand-in and then replaces every instance with one running `profile` (same engine
config, same names); the global policy first looks at the instances at the first arrival, so it
only ever sees the replaced ones. The live scheduler's admission settings and the ingress's own
admission (delivered-latency guard, reject hold-off) run as the live mesh's config sets them. A
profile's submit overhead (the live hops before an engine
sees a request, calibrate.py) delays each request's arrival at the simulated scheduler; records
are dated from when it was sent; the ingress's guard gets the overhead as its hops and the
ingress loop's delay measured live. A measured `HostSpeed` (slomesh/sim/host_speed.py) slows
every replica's steps as the live host's speed was over the trace. The scheduler's books plan
with `planning`, the profile the live scheduler was given (`slomesh up --profile`): it plans with
that file, not with the speed calibrated on its mesh (slomesh/sim/scheduler.py `plan_with`).
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
from slomesh.sim.host_speed import HostSpeed
from slomesh.sim.ingress import SimIngressConfig
from slomesh.sim.instance import SimInstance
from slomesh.sim.live_view import LiveViewConfig
from slomesh.sim.scheduler import SimAdmissionConfig
from slomesh.sim.simulator import Simulator
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
        admission: SimAdmissionConfig | None = None,
        ingress: SimIngressConfig | None = None,
        host_speed: HostSpeed | None = None,
        live_view: LiveViewConfig | None = None,
        planning: HardwareProfile | None = None,
    ) -> None:
        cluster = ClusterSpec(
            instances=[_STAND_IN.model_copy(update={"count": replicas})], engine=engine
        )
        super().__init__(
            cluster, stack, requests, admission=admission, ingress=ingress, live_view=live_view
        )
        # the engine config the Simulator made of the stack (queue stack, mode, preemption,
        # SCORPIO, what the engines report), on every replaced instance
        config = self.instances[0].core.config
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
        for inst in self.instances:
            inst.speed = host_speed
        if planning is not None:
            self.scheduler.plan_with({planning.model: planning})


@dataclass(frozen=True)
class SimRun:
    records: list[RequestRecord]
    scored_waits: list[ScoredWait]
    """The QLM estimator's scored predictions (empty for other stacks)."""
    policy: GlobalPolicy
    on_credit: int | None = None
    """Requests the ingress placed on lease credits (None: the fast path not simulated)."""


def simulate(
    profile: HardwareProfile,
    replicas: int,
    engine: EngineConfig,
    stack: StackConfig,
    requests: Sequence[Request],
    admission: SimAdmissionConfig | None = None,
    ingress: SimIngressConfig | None = None,
    loop_lag_s: float = 0.0,
    host_speed: HostSpeed | None = None,
    live_view: LiveViewConfig | None = None,
    planning: HardwareProfile | None = None,
) -> SimRun:
    """`requests` on the simulator; `admission` and `ingress`: the live scheduler's and
    ingress's admission settings (the live mesh's config), simulated in front of the stack;
    the ingress's guard spans the profile's submit overhead (its hops) and counts `loop_lag_s`
    (the ingress loop's delay measured live) as time spent (slomesh/sim/ingress.py);
    `host_speed`: the live host's speed over the trace (None: the profile's throughout);
    `live_view`: the policy reads the scheduler's books, reported late, as live
    (slomesh/sim/live_view.py; None: the engines' exact state); `planning`: the profile the
    live scheduler plans with (None: `profile`). With `live_view`, each request reaches the
    simulated scheduler its measured admission hop after its arrival, which comes the submit
    overhead less the hop it holds (`live_view.admission_hop_s`, the base hop) after it was sent
    (slomesh/bench/agree/admission_hop.py)."""
    overhead = profile.submit_overhead_s
    if live_view is not None:  # the hop to the scheduler's check is replayed on its own
        overhead = max(0.0, overhead - live_view.admission_hop_s)
    if ingress is not None:
        ingress = ingress.model_copy(update={"hops_s": overhead, "loop_lag_s": loop_lag_s})
    sim = ProfiledSimulator(
        profile,
        replicas,
        engine,
        stack,
        shift_in(requests, overhead),
        admission,
        ingress,
        host_speed,
        live_view,
        planning,
    )
    result = sim.run()
    tracker = getattr(sim.global_policy, "rwt_error", None)
    scored = list(tracker.scored()) if tracker is not None else []
    on_credit = sim.leases.placed if sim.leases is not None else None
    return SimRun(shift_out(result.records, overhead), scored, sim.global_policy, on_credit)
