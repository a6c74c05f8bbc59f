"""The ingress's own admission in the simulator (slomesh/sim/ingress.py): the reject hold-off
per ingress replica, and the delivered-latency guard fed with the simulated streams."""

from __future__ import annotations

from typing import cast

import pytest

from services.ingress.core.delivered import DeliveredGuardConfig
from services.replica.core.sequence import Sequence
from services.scheduler.core import events as cev
from services.scheduler.core.output import Rejection
from shared.domain import SLO, Request
from shared.metrics.records import RequestRecord
from slomesh.sim.cluster import ClusterSpec
from slomesh.sim.ingress import SimIngress, SimIngressConfig
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS
from tests.unit.sim.tiny_cpu import tiny_cpu_cluster

NO_GUARD = DeliveredGuardConfig(enabled=False)


def _req(rid: str, ttft_s: float = 2.0) -> Request:
    return Request(rid, "m", 10, 10, 0.0, SLO(ttft_s, None, class_name=f"c{ttft_s:g}"))


def _full(req: Request) -> Rejection:
    return Rejection(0, req, "queue cannot reach it", "deadline-infeasible", retry_after_s=5.0)


def test_a_queue_wide_rejection_holds_its_key_on_that_ingress_replica_only() -> None:
    ing = SimIngress(SimIngressConfig(num_replicas=2, delivered_guard=NO_GUARD))
    a = _req("a")
    assert ing.admit(a, 0.0) is None  # replica 0
    ing.heard(a, _full(a), 0.0)
    assert ing.admit(_req("b"), 0.05) is None  # replica 1: its gate is open
    held = ing.admit(_req("c"), 0.1)  # replica 0: held
    assert held is not None and "held at the ingress" in held
    assert ing.admit(_req("d"), 0.11) is None  # replica 1
    assert ing.admit(_req("e", ttft_s=10.0), 0.12) is None  # replica 0, another objective
    assert ing.admit(_req("f"), 0.13) is None  # replica 1
    assert ing.admit(_req("g"), 0.3) is None  # replica 0: the 0.25 s hold-off is over
    assert ing.held == 1


def test_an_admission_opens_the_key_and_no_hold_off_holds_nothing() -> None:
    ing = SimIngress(SimIngressConfig(num_replicas=1, delivered_guard=NO_GUARD))
    a, b = _req("a"), _req("b")
    assert ing.admit(a, 0.0) is None
    ing.heard(a, _full(a), 0.0)
    assert ing.admit(b, 0.1) is not None
    off = SimIngress(
        SimIngressConfig(num_replicas=1, delivered_guard=NO_GUARD, reject_hold_off_s=0.0)
    )
    assert off.admit(a, 0.0) is None
    off.heard(a, _full(a), 0.0)
    assert off.admit(b, 0.1) is None
    off.heard(b, None, 0.1)  # admitted
    assert off.admit(_req("c"), 0.2) is None


def _overload() -> tuple[ClusterSpec, list[Request]]:
    """Two CPU replicas of the tiny model with 2 seats each, a 2 s class beside a 10 s one, far
    past their capacity."""
    return tiny_cpu_cluster(requests=400, rate_rps=40.0)


def test_the_delivered_guard_learns_from_the_simulated_streams_and_turns_requests_away() -> None:
    """With the live ingress's defaults in front of FCFS engines at overload, the guard rejects
    arrivals predicted late from what the simulated streams delivered (it has samples: first
    tokens and ends were fed), and fewer admitted requests miss their TTFT than without it."""
    cluster, reqs = _overload()
    stack = STACKS.create("vllm-fcfs")
    bare = Simulator(cluster, stack, reqs).run().records
    sim = Simulator(cluster, stack, reqs, ingress=SimIngressConfig())
    guarded = sim.run().records
    assert sim.ingress is not None and sim.ingress.guarded > 0
    reasons = [r.reject_reason for r in guarded if r.rejected]
    assert any("measured on this mesh" in x for x in reasons)
    assert not any(r.rejected for r in bare)

    def late(records: list[RequestRecord]) -> int:
        return sum(
            1
            for r in records
            if not r.rejected and r.ttft_s is not None and r.ttft_s > r.ttft_deadline_s
        )

    assert late(guarded) < late(bare) / 2


class _Seq:
    def __init__(self, first_token_s: float) -> None:
        self.first_token_s = first_token_s


@pytest.mark.parametrize(
    ("hops_s", "loop_lag_s", "admitted"),
    [
        (0.0, 0.0, True),  # the samples: 1.5 s from the arrival, within 2 s x 0.9
        (0.4, 0.0, False),  # live the ticket starts before the hops: 1.9 s
        (0.0, 0.4, False),  # the ingress loop's delay counts as time spent: 1.9 s
        (0.2, 0.0, True),  # 1.7 s
    ],
)
def test_the_guard_spans_the_hops_and_the_loop_delay_measured_live(
    hops_s: float, loop_lag_s: float, admitted: bool
) -> None:
    guard = DeliveredGuardConfig(min_samples=1, seat_wait=False)
    cfg = SimIngressConfig(
        num_replicas=1, delivered_guard=guard, hops_s=hops_s, loop_lag_s=loop_lag_s
    )
    ing = SimIngress(cfg)
    for rid in ("a", "b"):
        assert ing.admit(_req(rid), 0.0) is None
        ing.finished(rid, 11, 1.6, first_s=1.5)
    assert ing.admit(_req("busy"), 2.0) is None
    ing.first_tokens(2.0, lambda rid: cast(Sequence, _Seq(2.0)))
    verdict = ing.admit(_req("new"), 2.0)
    assert (verdict is None) is admitted
    if not admitted:
        assert verdict is not None and verdict.startswith("predicted TTFT 1.900 s")


def _slice_ends(sim: Simulator) -> list[str]:
    """Run `sim` (every request served to its length), returning the requests whose slices
    ended (came back to the batch pool)."""
    ended: list[str] = []
    decide = sim.decide

    def counting(event: cev.ClusterEvent) -> None:
        if isinstance(event, cev.SliceEnd):
            ended.append(event.entry.request.request_id)
        decide(event)

    sim.decide = counting  # type: ignore[method-assign]
    records = sim.run().records
    asked = {r.request_id: r.output_tokens_to_generate for r in sim.requests}
    assert all(r.finished and r.output_tokens == asked[r.request_id] for r in records)
    return ended


def test_behind_the_ingress_a_batch_is_served_whole_as_live() -> None:
    """A batching stack planning on hints: without a hint a request is planned at half its
    max_tokens, and its engine would slice it there; the live ingress declines slice budgets
    (services/ingress/core/slice_budget.py), so behind the simulated ingress none is sliced."""
    cluster, reqs = _overload()
    stack = STACKS.create("slo-odbs-live")
    light = [r for r in reqs if r.max_tokens == 256][:40]
    assert _slice_ends(Simulator(cluster, stack, light))  # engines slicing as the batch says
    sim = Simulator(cluster, stack, light, ingress=SimIngressConfig(delivered_guard=NO_GUARD))
    assert _slice_ends(sim) == []


def test_serve_style_routing_sends_an_arrival_to_the_ingress_with_fewer_streams() -> None:
    """`fewest-ongoing`: of the two ingress replicas, the one with fewer requests in flight
    takes the arrival (ties at random, seeded); a stream's end frees its place."""
    cfg = SimIngressConfig(num_replicas=2, delivered_guard=NO_GUARD, routing="fewest-ongoing")
    ing = SimIngress(cfg)
    for k in range(4):
        assert ing.admit(_req(f"r{k}"), 0.1 * k) is None
    assert [r.ongoing for r in ing.replicas] == [2, 2]  # always to the emptier one
    first = ing._ongoing["r0"]
    mine = [rid for rid, rep in ing._ongoing.items() if rep is first]
    for rid in mine:
        ing.finished(rid, 10, 1.0)
    assert first.ongoing == 0
    assert ing.admit(_req("next"), 1.1) is None
    assert ing._ongoing["next"] is first
    picks = set()
    for s in range(8):
        one = SimIngress(cfg.model_copy(update={"routing_seed": s}))
        one.admit(_req("a"), 0.0)
        picks.add(one.replicas.index(one._ongoing["a"]))
    assert picks == {0, 1}  # a tie goes either way, by the seed
    turns = SimIngress(SimIngressConfig(num_replicas=2, delivered_guard=NO_GUARD))
    for k in range(3):
        turns.admit(_req(f"t{k}"), 0.0)
    assert [r.ongoing for r in turns.replicas] == [2, 1]  # dealt in turn, whatever is in flight
