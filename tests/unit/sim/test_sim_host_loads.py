"""Model loads on one host (slomesh/sim/host_loads.py): engine restarts at once share the CPUs,
each at 1 / (1 + slowdown x (k - 1)) of its speed, and their ends move as loads come and go."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from services.replica.core.outputs import StepKind, StepPlan
from shared.domain import SLO, Request
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.host_loads import HostLoads
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS


def _inst(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, core=SimpleNamespace(busy_s=0.0))


def _load(start_s: float, duration_s: float) -> StepPlan:
    return StepPlan(StepKind.LOAD_MODEL, start_s, duration_s=duration_s, load_model="m")


@pytest.mark.parametrize(
    ("slowdown", "starts", "ends"),
    [
        # (slowdown, (start, profiled seconds) per load, each load's end)
        (0.5, [(0.0, 10.0)], [10.0]),  # alone: its profiled time
        (0.5, [(0.0, 10.0), (20.0, 10.0)], [10.0, 30.0]),  # one after the other
        (0.5, [(0.0, 10.0), (0.0, 10.0)], [15.0, 15.0]),  # at once: each at 1/1.5 speed
        (1.0, [(0.0, 10.0), (0.0, 10.0)], [20.0, 20.0]),
        # overlap from 5 s: the first has 5 s of work left at half speed (ends 15), the second
        # did 5 s of its 10 by then, and the other 5 alone (ends 20)
        (1.0, [(0.0, 10.0), (5.0, 10.0)], [15.0, 20.0]),
        (0.0, [(0.0, 10.0), (0.0, 10.0)], [10.0, 10.0]),  # no slowdown: as profiled
    ],
)
def test_loads_at_once_share_the_host(
    slowdown: float, starts: list[tuple[float, float]], ends: list[float]
) -> None:
    host = HostLoads(slowdown)
    insts = [_inst(f"i{k}") for k in range(len(starts))]
    plans = [_load(s, d) for s, d in starts]
    pending = list(range(len(plans)))  # loads not started yet, in start order
    running: list[int] = []
    while pending or running:
        first_end = min(running, key=lambda k: plans[k].end_s, default=None)
        if pending and (first_end is None or plans[pending[0]].start_s < plans[first_end].end_s):
            k = pending.pop(0)
            host.start(insts[k], plans[k])  # type: ignore[arg-type]
            running.append(k)
        else:
            assert first_end is not None
            running.remove(first_end)
            host.end(insts[first_end], plans[first_end].end_s)  # type: ignore[arg-type]
    assert [p.end_s for p in plans] == pytest.approx(ends)
    for inst, plan, (_, profiled_s) in zip(insts, plans, starts, strict=True):
        assert inst.core.busy_s == pytest.approx(plan.duration_s - profiled_s)  # the moves


def test_a_negative_slowdown_is_refused() -> None:
    with pytest.raises(ValueError, match="concurrent_load_slowdown must be >= 0"):
        HostLoads(-0.1)


def test_the_simulator_charges_two_loads_at_once() -> None:
    """Both replicas of many-models swap at once (a request each for the model neither has):
    with a slowdown both loads take longer than the profile's time."""
    sc = SCENARIOS.create("many-models")
    reqs = [
        Request(f"c{k}", "tiny-llama-c", 64, 4, 0.0, SLO(600.0), true_output_tokens=4)
        for k in range(2)
    ]
    firsts = {}
    for slowdown in (0.0, 0.5):
        cluster = sc.cluster.model_copy(update={"concurrent_load_slowdown": slowdown})
        result = Simulator(cluster, STACKS.create("vllm-fcfs"), reqs).run()
        assert len({r.instance for r in result.records}) == 2  # one load on each replica
        firsts[slowdown] = sorted(r.first_token_s or 0.0 for r in result.records)
    assert all(b > a for a, b in zip(firsts[0.0], firsts[0.5], strict=True))
