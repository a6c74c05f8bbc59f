"""Admission leases (core/leases.py): credits granted only while there is headroom, never the
same seat twice across ingresses or notices in flight, and fast-path placements recorded in the
admission core and the policy's books (QLM evicts and finishes them as any placement)."""

from __future__ import annotations

from typing import Any

import pytest

from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.leases import LeaseBook, LeaseConfig, free_seats
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def req(rid: str, arrival_s: float = 0.0, ttft_s: float = 20.0, crit: int = 0) -> Request:
    return Request(rid, "m", 10, 20, arrival_s, SLO(ttft_s), criticality=crit)


def rep(
    name: str, seats: int = 4, in_flight: int = 0, healthy: bool = True, swaps: tuple[str, ...] = ()
) -> LiveReplica:
    r = LiveReplica(name, "cpu", "m", None, max_num_seqs=seats, healthy=healthy)
    r.swap_profiles = dict.fromkeys(swaps)
    for k in range(in_flight):
        r.in_flight[f"{name}-x{k}"] = req(f"{name}-x{k}")
    return r


@pytest.mark.parametrize(
    ("replicas", "queued", "max_in_flight", "pooled", "want"),
    [
        ([rep("a"), rep("b", in_flight=3)], 0, 64, frozenset(), {"a": 4, "b": 1}),
        ([rep("a"), rep("b")], 1, 64, frozenset(), {"a": 0, "b": 0}),  # queue: full path
        ([rep("a", healthy=False), rep("b")], 0, 64, frozenset(), {"a": 0, "b": 4}),
        ([rep("a", in_flight=6)], 0, 64, frozenset(), {"a": 0}),  # engine window over-full
        ([rep("a", seats=16)], 0, 2, frozenset(), {"a": 2}),  # admission limit bounds it
        ([rep("a"), rep("b")], 0, 64, frozenset({"b"}), {"a": 4, "b": 0}),  # pools: Serve picks
        # a replica that may swap: the policy plans which model it serves, not a credit
        ([rep("a"), rep("b", swaps=("m2",))], 0, 64, frozenset(), {"a": 4, "b": 0}),
    ],
)
def test_free_seats_only_with_headroom(
    replicas: list[LiveReplica],
    queued: int,
    max_in_flight: int,
    pooled: frozenset[str],
    want: dict[str, int],
) -> None:
    assert free_seats(replicas, queued, max_in_flight, pooled) == want


# (steps, expected limits of the last grant): each step is ("grant", ingress, free, now)
# or ("notice", ingress, app)
@pytest.mark.parametrize(
    ("steps", "want"),
    [
        ([("grant", "i1", {"a": 10}, 0.0)], {"a": 4}),  # capped at max_credits
        ([("grant", "i1", {"a": 3}, 0.0)], {"a": 3}),
        ([("grant", "i1", {"a": 0}, 0.0)], {"a": 0}),  # no headroom: nothing
        # another ingress holds 4 of the 6 free seats: 2 left for this one
        ([("grant", "i1", {"a": 6}, 0.0), ("grant", "i2", {"a": 6}, 0.1)], {"a": 2}),
        # two live ingresses share 4 free seats: i1's next grant shrinks to its half
        (
            [
                ("grant", "i1", {"a": 4}, 0.0),
                ("grant", "i2", {"a": 4}, 0.1),
                ("grant", "i1", {"a": 4}, 0.2),
            ],
            {"a": 2},
        ),
        # ... until its grant expires (ttl 0.5 s)
        ([("grant", "i1", {"a": 6}, 0.0), ("grant", "i2", {"a": 6}, 0.6)], {"a": 4}),
        # notices move the window: 3 used, 4 more granted on top (cumulative limit 7)
        (
            [("grant", "i1", {"a": 9}, 0.0)]
            + [("notice", "i1", "a")] * 3
            + [("grant", "i1", {"a": 9}, 0.1)],
            {"a": 7},
        ),
        # a re-grant replaces the ingress's own reservation instead of adding to it
        ([("grant", "i1", {"a": 4}, 0.0), ("grant", "i1", {"a": 4}, 0.1)], {"a": 4}),
        # revoked: the queue filled (free 0): the limit falls back to what was noticed
        (
            [("grant", "i1", {"a": 4}, 0.0), ("notice", "i1", "a"), ("grant", "i1", {"a": 0}, 0.1)],
            {"a": 1},
        ),
    ],
)
def test_lease_book_grants(steps: list[tuple[Any, ...]], want: dict[str, int]) -> None:
    book = LeaseBook(LeaseConfig(max_credits=4, ttl_ms=500))
    got: dict[str, int] = {}
    for step in steps:
        if step[0] == "grant":
            got = book.grant(step[1], step[2], step[3])
        else:
            book.noticed(step[1], step[2])
    assert got == want


def test_disabled_leases_grant_nothing() -> None:
    book = LeaseBook(LeaseConfig(enabled=False))
    assert book.grant("i1", {"a": 8}, 0.0) == {"a": 0}


def test_reserved_seats_are_never_granted_twice() -> None:
    book = LeaseBook(LeaseConfig(max_credits=8, ttl_ms=1000))
    limits = [book.grant(f"i{k}", {"a": 10}, 0.0)["a"] for k in range(4)]
    assert limits == [8, 2, 0, 0]  # later ingresses get what is left (shares settle on refresh)
    assert book.reserved("a", 0.5) == 10
    assert book.reserved("a", 1.5) == 0  # all expired


@pytest.mark.parametrize("policy", ["qlm", "least-loaded", "pow2"])
def test_leased_placement_is_recorded_and_finished(policy: str) -> None:
    r = rep("replica-0", seats=4)
    core = AdmissionCore([r], create_global_policy(policy), policy, 64)
    assert core.place_leased(req("f1"), "replica-0", 0.0)
    assert "f1" in r.in_flight and core.admitted == 1
    assert core.take_dispatched() == []  # it runs already: nothing for a waiter
    assert not core.place_leased(req("f1"), "replica-0", 0.1)  # known id: not twice
    assert not core.place_leased(req("f2"), "nowhere", 0.1)
    assert core.report("f1", 5, 1.0) is r
    assert r.in_flight == {}


def test_qlm_counts_leased_placements_and_queues_behind_them() -> None:
    """A fast-path placement is in QLM's own books (its eviction candidates, fairness
    counters): the replica's room is taken, later arrivals queue, and its report lets the
    queue move (the issue's 'no SLO feature lost')."""
    r = rep("replica-0", seats=1)
    core = AdmissionCore([r], create_global_policy("qlm"), "qlm", 64)
    for k in range(4):
        assert core.place_leased(req(f"f{k}"), "replica-0", 0.0)
    assert set(core.policy.ops.placed["replica-0"]) == {"f0", "f1", "f2", "f3"}  # type: ignore[attr-defined]
    assert free_seats(core.replicas.values(), core.queued, 64, frozenset()) == {"replica-0": 0}
    decisions = [core.admit(req(f"q{k}"), 0.1) for k in range(4)]
    queued = [f"q{k}" for k, d in enumerate(decisions) if d.queued]
    assert len(queued) >= 3 and core.queued == len(queued)  # QLM queues behind them
    for k in range(4):
        core.report(f"f{k}", 5, 0.2)
    core.tick(0.3)
    assert {q.request_id for q, _ in core.take_dispatched()} & set(queued)


def test_batching_policy_takes_no_leases() -> None:
    r = rep("replica-0")
    core = AdmissionCore([r], create_global_policy("batching", {"lengths": "true"}), "batching", 64)
    assert not core.place_leased(req("f1"), "replica-0", 0.0)
    assert r.in_flight == {}


def test_round_robin_takes_no_leases() -> None:
    """The fast path places on the freest replica; round-robin ignores load, so with leases its
    live placements would not be the stack's (nor the simulator's): it places every request."""
    r = rep("replica-0")
    core = AdmissionCore([r], create_global_policy("round-robin"), "round-robin", 64)
    assert not core.place_leased(req("f1"), "replica-0", 0.0)
    assert r.in_flight == {}
    assert create_global_policy("least-loaded").supports_leases
