"""Live replicas that swap between models: what the scheduler's policies see of them (models
served, swap cost from the profile, the active model from Status) and where they place."""

from __future__ import annotations

import dataclasses

import pytest

from services.scheduler.args import SchedulerArgs, live_replicas
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def req(rid: str, model: str) -> Request:
    return Request(rid, model, 10, 20, 0.0, SLO(5.0))


def swapping(fakes, name: str = "replica-0", model: str = "A") -> LiveReplica:
    profile = dataclasses.replace(fakes.profile("B"), weight_bytes=6 * 10**9)
    return LiveReplica(
        name, "gpu", model, fakes.profile(model), swap_profiles={"B": profile, "C": None}
    )


def test_live_replica_serves_its_swap_models_at_their_measured_cost(fakes) -> None:
    rep = swapping(fakes)
    assert rep.models == ("A", "B", "C")
    assert [rep.serves(m) for m in ("A", "B", "C", "Z")] == [True, True, True, False]
    assert rep.load_time_s("A") == 0.0
    assert rep.load_time_s("B") == 6.0  # 6e9 weight bytes at the profile's 1e9 B/s load
    assert rep.load_time_s("Z") == float("inf")
    assert rep.status().active_model == "A"


def test_live_replica_follows_the_active_model_its_status_reports(fakes) -> None:
    rep = swapping(fakes)
    rep.observe_active("B")
    assert rep.status().active_model == "B"
    assert rep.load_time_s("B") == 0.0
    assert rep.load_time_s("A") > 0.0
    rep.observe_active("not-mine")  # a model it does not serve changes nothing
    assert rep.active_model == "B"


def test_live_replica_without_a_profile_for_a_swap_model_names_it(fakes) -> None:
    rep = swapping(fakes)
    try:
        rep.load_time_s("C")
    except ValueError as err:
        assert "no hardware profile for C on gpu (replica replica-0)" in str(err)
    else:
        raise AssertionError("a swap cost without a profile must fail naming the model")


def test_scheduler_places_a_swap_model_on_the_replica_that_lists_it(fakes) -> None:
    reps = [swapping(fakes, "replica-0", "A"), LiveReplica("replica-1", "gpu", "D", None)]
    core = AdmissionCore(reps, create_global_policy("multiplex"), "multiplex", 8)
    for r in reps:
        core.set_health(r.application, True, 0.0)
    decision = core.admit(req("b1", "B"), 0.0)
    assert decision.admitted and decision.replica.application == "replica-0"
    assert not core.admit(req("z1", "Z"), 0.0).admitted


def test_scheduler_args_give_each_swap_model_its_profile() -> None:
    args = SchedulerArgs.model_validate(
        {
            "replicas": [
                {
                    "application": "replica-0",
                    "gpu": "A100-80GB",
                    "model": "llama-3.1-8b",
                    "swap_models": ["mistral-7b"],
                }
            ]
        }
    )
    (rep,) = live_replicas(args)
    assert rep.models == ("llama-3.1-8b", "mistral-7b")
    assert rep.profile("mistral-7b").model == "mistral-7b"
    assert 0.0 < rep.load_time_s("mistral-7b") < float("inf")


def _books(fakes, placed: str, order: str, deadlines: str = "") -> LiveReplica:
    rep = swapping(fakes)
    rep.deadline_ordered = bool(deadlines)
    for k, model in enumerate(placed):
        due = float(deadlines[k]) if deadlines else 5.0
        rep.book(Request(f"r{k}", model, 10, 20, 0.0, SLO(due)), 0.0)
    if order:
        rep.book_swap(order)
    return rep


@pytest.mark.parametrize(
    ("placed", "order", "deadlines", "due"),
    [
        ("", "", "", ""),
        ("AA", "", "", ""),  # the active model's requests: no swap
        ("AB", "", "", "B"),  # the first request for another model swaps the replica
        ("", "B", "", "B"),  # the order, with nothing placed for it yet
        ("AB", "B", "", "B"),
        ("AC", "B", "", "C"),  # a third model heads the line: its swap goes first
        ("ACB", "B", "", "C"),
        ("ABC", "B", "", "B"),
        ("ACB", "B", "951", "B"),  # EDF line: B's request (due 1 s) is its head
    ],
)
def test_the_books_swap_due_follows_the_engines_rule(
    fakes, placed: str, order: str, deadlines: str, due: str
) -> None:
    assert _books(fakes, placed, order, deadlines).swap_due() == due


def test_the_books_keep_an_order_while_the_replica_swaps_to_a_third_model_first(fakes) -> None:
    rep = _books(fakes, "C", "B")
    rep.observe_active("C", swapping=True)
    assert (rep.swap_ordered, rep.swap_due()) == ("B", "C")  # loading C, B still ordered
    assert rep.expected_swap_s() == 0.0  # no profile for C
    rep.observe_active("C")
    rep.forget("r0")
    assert rep.swap_due() == "B" and rep.expected_swap_s() == 6.0
    rep.observe_active("B", swapping=True)
    assert (rep.swap_ordered, rep.swap_due(), rep.expected_swap_s()) == ("", "B", 6.0)
    rep.observe_active("B")
    assert rep.swap_due() == "" and rep.status().active_model == "B"
