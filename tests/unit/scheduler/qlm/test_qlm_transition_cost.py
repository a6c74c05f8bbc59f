"""What the QLM planner charges for a transition to a model (estimates.transition_s).

The planner charges a swap only where a run of a model follows one of another model, so no
model's transition is free: the model an instance has active (or is loading, which the
scheduler's books name active for the whole load) costs its way back from host memory, any
other model its load time. Charging 0 there let the planner interleave the active model with
others as if coming back to it were free."""

from __future__ import annotations

import math

import pytest

from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.qlm.clustering import OutputEstimate
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.estimates import QueueEstimator, transition_s
from services.scheduler.core.qlm.groups import Grouper
from services.scheduler.core.qlm.virtual_queues import VirtualQueues
from shared.domain import SLO, Request
from tests.unit.scheduler.conftest import make_profile

# weight 1e9 bytes: a cold load at 1e9 B/s takes 1 s, a load from host memory at 1e10 B/s 0.1 s
COLD_S, WARM_S = 1.0, 0.1


def _replica(active: str = "", swapping: bool = False, profiled: bool = True) -> LiveReplica:
    rep = LiveReplica(
        "r0",
        "gpu",
        "A",
        make_profile("A") if profiled else None,
        swap_profiles={"B": make_profile("B")},
    )
    if active:
        rep.observe_active(active, swapping)
    return rep


@pytest.mark.parametrize(
    ("case", "replica", "model", "expected_s"),
    [
        ("the active model: back from host memory", _replica(), "A", WARM_S),
        ("another model: its load time", _replica(), "B", COLD_S),
        ("the model a running swap loads: back from host memory", _replica("B", True), "B", WARM_S),
        ("the model a running swap leaves: its load time", _replica("B", True), "A", COLD_S),
        ("a model the replica does not serve: never", _replica(), "Z", math.inf),
        ("the active model with no profile: nothing known", _replica(profiled=False), "A", 0.0),
    ],
)
def test_transition_cost(case: str, replica: LiveReplica, model: str, expected_s: float) -> None:
    assert transition_s(replica, model) == pytest.approx(expected_s), case


def test_a_run_back_to_the_active_model_waits_for_its_swap_back() -> None:
    """A queue A, B, A on a replica with A active: the second A group starts after the B run
    and the swap back to A, not straight after the B run."""
    replica = _replica()
    grouper, vqs = Grouper(), VirtualQueues(["r0"])
    est = QueueEstimator(QLMConfig(), grouper, vqs, {"r0": replica})
    for k, model in enumerate("ABA"):
        request = Request(f"q{k}", model, 64, 32, 0.0, SLO(100.0 + k))
        group = grouper.assign(request, OutputEstimate(32.0, 8.0, 64), 0.0)
        vqs.insert("r0", group.group_id)
    first, second, third = est.estimates("r0")
    assert [g.transition for g in (first, second, third)] == [False, True, True]
    assert second.run_start_s >= first.completion_s + COLD_S  # the swap to B
    assert third.run_start_s == pytest.approx(second.completion_s + WARM_S)  # and back to A


def test_with_one_model_queued_there_is_no_way_back_to_charge() -> None:
    grouper, vqs = Grouper(), VirtualQueues(["r0"])
    est = QueueEstimator(QLMConfig(), grouper, vqs, {"r0": _replica()})
    group = grouper.assign(
        Request("q0", "A", 64, 32, 0.0, SLO(100.0)), OutputEstimate(32.0, 8.0, 64), 0.0
    )
    vqs.insert("r0", group.group_id)
    assert est.swap_costs("r0") == {"A": 0.0}
    assert est.swap_costs("r0", {"A", "B"}) == pytest.approx({"A": WARM_S, "B": COLD_S})
