"""The hop from the ingress to the scheduler's admission check, replayed in the simulator
(slomesh/sim/live_view.py `admission_hops_s`): the scheduler checks each request its hop after
its arrival, and the TTFT guard counts the hop as time spent, with the live guard's code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from shared.domain import SLO, Request
from shared.domain.engine import EngineConfig
from shared.metrics.records import RequestRecord
from shared.profiles.io import load_profiles
from slomesh.bench.agree.sim import simulate
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.live_view import LiveTiming, LiveViewConfig
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

PROFILE_FILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
PROFILE = load_profiles(PROFILE_FILE)[0]


def _cluster() -> ClusterSpec:
    inst = InstanceSpec(gpu="cpu", models=[PROFILE.model], count=2, profile_file=str(PROFILE_FILE))
    return ClusterSpec(instances=[inst], engine=EngineConfig(max_num_seqs=2))


def _req(rid: str, arrival_s: float, ttft_s: float = 2.0) -> Request:
    return Request(rid, PROFILE.model, 64, 8, arrival_s, SLO(ttft_s, None, class_name="c"))


def _one(view: LiveViewConfig, stack: str = "scorpio") -> RequestRecord:
    """The record of one request, 1 s into the run, under `view` (Status every 50 ms)."""
    sim = Simulator(_cluster(), STACKS.create(stack), [_req("r", 1.0)], live_view=view)
    return sim.run().records[0]


def test_the_hop_of_a_request_is_its_measured_one_else_the_constant() -> None:
    timing = LiveTiming(LiveViewConfig(admission_hops_s={"a": 0.4}, admission_hop_s=0.1))
    assert timing.admission_hop_s("a") == 0.4
    assert timing.admission_hop_s("b") == 0.1
    assert LiveTiming(LiveViewConfig()).admission_hop_s("a") == 0.0


@pytest.mark.parametrize(
    ("hops", "constant_s", "rejected"),
    [
        ({}, 0.0, False),  # checked at its arrival: an idle replica serves it in time
        ({"r": 0.5}, 0.0, False),  # half a second spent of its 2 s: still in time
        ({"r": 2.5}, 0.0, True),  # more than its TTFT SLO spent before the check
        ({"other": 2.5}, 2.5, True),  # none measured for it: the constant
        ({"r": 0.5}, 2.5, False),  # its own measured hop, not the constant
    ],
)
def test_the_ttft_guard_counts_the_hop_to_the_admission_check(
    hops: dict[str, float], constant_s: float, rejected: bool
) -> None:
    view = LiveViewConfig(admission_hops_s=hops, admission_hop_s=constant_s, status_interval_s=0.05)
    rec = _one(view)
    assert rec.rejected is rejected
    if rejected:  # the guard's own reason, its prediction counting the hop
        assert rec.reject_reason is not None
        assert rec.reject_reason.startswith("deadline-infeasible: predicted TTFT 2.5")
        assert rec.rejected_s == pytest.approx(1.0 + 2.5)


def test_a_request_reaches_its_engine_only_after_the_hop() -> None:
    """Without a guard the hop still delays the placement: the first token comes after it."""
    quick = _one(LiveViewConfig(status_interval_s=0.05), "edf")
    late = _one(LiveViewConfig(admission_hops_s={"r": 0.75}, status_interval_s=0.05), "edf")
    assert quick.ttft_s is not None and late.ttft_s is not None
    assert late.ttft_s == pytest.approx(quick.ttft_s + 0.75)


def test_the_calibrated_overhead_holds_the_base_hop_once() -> None:
    """bench-agree's simulation: the submit overhead calibrated live already holds the base hop,
    so a request whose hop is the base one reaches its engine the overhead after it was sent, as
    with no hop at all; a longer hop adds only what it exceeds the base by."""
    prof = replace(PROFILE, submit_overhead_s=0.3)
    engine = EngineConfig(max_num_seqs=2)
    stack = STACKS.create("edf")

    def ttft(view: LiveViewConfig) -> float:
        run = simulate(prof, 2, engine, stack, [_req("r", 1.0)], live_view=view)
        got = run.records[0]
        assert got.arrival_s == pytest.approx(1.0)  # dated from when it was sent
        assert got.ttft_s is not None
        return got.ttft_s

    none = ttft(LiveViewConfig(status_interval_s=0.05))
    assert ttft(LiveViewConfig(admission_hop_s=0.1, status_interval_s=0.05)) == pytest.approx(none)
    longer = LiveViewConfig(
        admission_hops_s={"r": 0.6}, admission_hop_s=0.1, status_interval_s=0.05
    )
    assert ttft(longer) == pytest.approx(none + 0.5)
