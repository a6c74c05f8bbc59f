"""A live replica with several models as the scheduler counts it: the requests placed for a model
other than the active one, and every request placed after the first of them, wait (the
replica's model host takes requests in placement order and runs only its active model's), as the
simulated engine holds them waiting; those of the active model ahead of them run up to the seats.
QLM's pull window reads that count: a replica counted as running requests that wait for a swap
went on pulling the next groups, each with its own swap order."""

from __future__ import annotations

import pytest

from services.scheduler.core.cluster_view import PendingChange
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.live_view import LiveReplica, blocked
from shared.domain import SLO, Request


def req(rid: str, model: str) -> Request:
    return Request(rid, model, 10, 20, 0.0, SLO(5.0))


def replica(placed: str, active: str = "A", seats: int = 3, models: str = "BC") -> LiveReplica:
    rep = LiveReplica(
        "replica-0", "cpu", "A", None, max_num_seqs=seats, swap_profiles=dict.fromkeys(models)
    )
    rep.observe_active(active.rstrip("*"), swapping=active.endswith("*"))
    for k, model in enumerate(placed):
        rep.book(req(f"r{k}", model), 0.0)
    return rep


@pytest.mark.parametrize(
    ("placed", "active", "waiting", "running"),
    [
        ("", "A", 0, 0),
        ("AA", "A", 0, 2),
        ("AAAAA", "A", 2, 3),  # beyond the seats
        ("B", "A", 1, 0),  # waits for the swap
        ("AB", "A", 1, 1),
        ("ABA", "A", 2, 1),  # the A behind B waits in the replica's line too
        ("ABC", "A", 2, 1),
        ("BA", "A", 2, 0),
        ("BB", "B", 0, 2),  # after the swap (Status reports B active)
        ("BBA", "B", 1, 2),
        ("AAAAB", "A", 2, 3),  # beyond the seats and behind them
        ("BB", "B*", 2, 0),  # Status: the swap to B runs, nothing runs until it is loaded
    ],
)
def test_requests_for_another_model_and_those_behind_them_wait(
    placed: str, active: str, waiting: int, running: int
) -> None:
    st = replica(placed, active).status()
    assert (st.active_model, st.waiting, st.running) == (active.rstrip("*"), waiting, running)


@pytest.mark.parametrize(
    ("placed", "event", "waiting", "running"),
    [
        ("A", "A", 0, 2),
        ("A", "B", 1, 1),  # placed in this event for another model: waits
        ("A", "BA", 2, 1),
        ("B", "A", 2, 0),
        ("AA", "AA", 1, 3),
    ],
)
def test_placements_of_the_event_count_as_the_replica_will_hold_them(
    placed: str, event: str, waiting: int, running: int
) -> None:
    rep = replica(placed)
    out = Decisions()
    for k, model in enumerate(event):
        out.place(req(f"e{k}", model), rep)
    change = out.change(rep.name)
    assert change is not None and change.placed_models == tuple(event)
    st = rep.status_after(change)
    assert (st.waiting, st.running) == (waiting, running)


def test_a_replica_of_one_model_counts_only_its_seats() -> None:
    """A request naming a model the replica does not serve (an adapter's name, an alias) does
    not block anything: only the seats count, as before."""
    rep = replica("AXA", models="")
    assert (rep.status().waiting, rep.status().running) == (0, 3)
    assert blocked(rep, ["A", "X", "A"]) == 0


def test_evictions_of_the_event_leave_the_count() -> None:
    rep = replica("AAB")
    st = rep.status_after(PendingChange(evicted_running=1))
    assert (st.waiting, st.running, st.evicted) == (1, 1, 1)


@pytest.mark.parametrize(
    ("deadline_ordered", "waiting", "running"),
    [
        (False, 3, 0),  # placement order: B heads the line, both A behind it wait
        (True, 1, 2),  # earliest deadline first: both A run, only B waits for its swap
    ],
)
def test_a_deadline_ordered_replica_counts_its_line_earliest_deadline_first(
    deadline_ordered: bool, waiting: int, running: int
) -> None:
    rep = LiveReplica(
        "replica-0", "cpu", "A", None, max_num_seqs=3, swap_profiles=dict.fromkeys("B")
    )
    rep.deadline_ordered = deadline_ordered
    for rid, model, ttft_s in (("b", "B", 300.0), ("a1", "A", 20.0), ("a2", "A", 60.0)):
        rep.book(Request(rid, model, 10, 20, 0.0, SLO(ttft_s)), 0.0)
    st = rep.status()
    assert (st.waiting, st.running) == (waiting, running)
