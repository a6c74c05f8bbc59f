"""The ingress's credit ledger (core/credits.py): places only with a live credit for the model,
on the replica with the most left, counts across grants within an epoch, starts again in a new
epoch, and asks for a refresh when due."""

from __future__ import annotations

from typing import Any

import pytest

from services.ingress.core.credits import Credit, CreditLedger


def c(app: str, limit: int, model: str = "m") -> Credit:
    return Credit(app, model, "cpu", limit)


# each step: ("grant", epoch, [credits], now) | ("take", model, now, expected app or None)
#            | ("back", app, epoch) | ("drop", app) | ("fill", app, epoch, now)
@pytest.mark.parametrize(
    "steps",
    [
        [("take", "m", 0.0, None)],  # no grant yet: full path
        [
            ("grant", "e", [c("a", 2)], 0.0),
            ("take", "m", 0.1, "a"),
            ("take", "m", 0.1, "a"),
            ("take", "m", 0.1, None),
        ],
        # the replica with the most credit left first
        [
            ("grant", "e", [c("a", 1), c("b", 3)], 0.0),
            ("take", "m", 0.0, "b"),
            ("take", "m", 0.0, "b"),
            ("take", "m", 0.0, "a"),
            ("take", "m", 0.0, "b"),
            ("take", "m", 0.0, None),
        ],
        # equal credit left: in turn (not always the first replica of the grant)
        [
            ("grant", "e", [c("a", 4), c("b", 4)], 0.0),
            ("take", "m", 0.0, "a"),
            ("take", "m", 0.0, "b"),
            ("grant", "e", [c("a", 5), c("b", 5)], 0.1),  # refreshed after each notice
            ("take", "m", 0.1, "a"),
            ("take", "m", 0.1, "b"),
            ("grant", "e", [c("a", 6), c("b", 6), c("x", 9, model="other")], 0.2),
            ("take", "m", 0.2, "b"),  # the turn moved on: b's turn, equal left again
            ("take", "m", 0.2, "a"),
        ],
        [("grant", "e", [c("a", 2, model="other")], 0.0), ("take", "m", 0.0, None)],
        [("grant", "e", [c("a", 2)], 0.0), ("take", "m", 0.6, None)],  # expired (ttl 0.5 s)
        # the same epoch: counts carry over a new grant (limit 3 after 2 taken: one left)
        [
            ("grant", "e", [c("a", 2)], 0.0),
            ("take", "m", 0.0, "a"),
            ("take", "m", 0.0, "a"),
            ("grant", "e", [c("a", 3)], 0.1),
            ("take", "m", 0.1, "a"),
            ("take", "m", 0.1, None),
        ],
        # a new epoch (scheduler restarted): counts start from zero
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("grant", "f", [c("a", 1)], 0.1),
            ("take", "m", 0.1, "a"),
        ],
        # revoked: a replica left out of the grant gets nothing
        [("grant", "e", [c("a", 2)], 0.0), ("grant", "e", [], 0.1), ("take", "m", 0.1, None)],
        # a notice that failed gives its credit back (same epoch only)
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("back", "a", "e"),
            ("take", "m", 0.0, "a"),
        ],
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("back", "a", "old"),
            ("take", "m", 0.0, None),
        ],
        # a replica found gone: no more credits spent on it; the others still serve
        [
            ("grant", "e", [c("a", 3), c("b", 1)], 0.0),
            ("drop", "a"),
            ("take", "m", 0.0, "b"),
            ("take", "m", 0.0, None),
        ],
        # until a later grant names it again
        [
            ("grant", "e", [c("a", 2)], 0.0),
            ("drop", "a"),
            ("grant", "e", [c("a", 2)], 0.1),
            ("take", "m", 0.1, "a"),
        ],
        # a finished credit placement gives its seat to the next request, once per finish
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("take", "m", 0.0, None),
            ("fill", "a", "e", 0.1),
            ("take", "m", 0.1, "a"),
            ("take", "m", 0.1, None),
        ],
        # the next grant counts the seats then free: refills start again from zero
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("fill", "a", "e", 0.1),
            ("grant", "e", [c("a", 1)], 0.2),  # limit 1, 1 taken: nothing left
            ("take", "m", 0.2, None),
        ],
        # not for another epoch, a replica not in the grant, nor an expired grant
        [
            ("grant", "e", [c("a", 1)], 0.0),
            ("take", "m", 0.0, "a"),
            ("fill", "a", "old", 0.1),
            ("fill", "b", "e", 0.1),
            ("take", "m", 0.1, None),
            ("fill", "a", "e", 0.6),
            ("grant", "e", [c("a", 1)], 0.7),
            ("take", "m", 0.7, None),
        ],
    ],
)
def test_ledger(steps: list[tuple[Any, ...]]) -> None:
    ledger = CreditLedger()
    for step in steps:
        if step[0] == "grant":
            ledger.update(step[1], step[2], 0.5, step[3])
        elif step[0] == "back":
            ledger.give_back(step[1], step[2])
        elif step[0] == "drop":
            ledger.drop(step[1])
        elif step[0] == "fill":
            ledger.refill(step[1], step[2], step[3])
        else:
            got = ledger.take(step[1], step[2])
            assert (got.application if got else None) == step[3], step


@pytest.mark.parametrize(
    ("grant", "takes", "now", "due"),
    [
        (None, 0, 0.0, True),  # never granted
        ([c("a", 4)], 0, 0.1, False),
        ([c("a", 4)], 0, 0.26, True),  # half the ttl passed
        ([c("a", 1)], 1, 0.01, False),  # none left, but just asked: not at every request
        ([c("a", 1)], 1, 0.06, True),  # none left and a tenth of the ttl passed
    ],
)
def test_refresh_due(grant: list[Credit] | None, takes: int, now: float, due: bool) -> None:
    ledger = CreditLedger()
    if grant is not None:
        ledger.update("e", grant, 0.5, 0.0)
    for _ in range(takes):
        ledger.take("m", 0.0)
    assert ledger.refresh_due("m", now) is due


@pytest.mark.parametrize(
    ("grant", "takes", "now", "holds"),
    [
        (None, 0, 0.0, False),  # never granted
        ([c("a", 2)], 0, 0.1, True),
        ([c("a", 2)], 1, 0.1, True),  # one left
        ([c("a", 2)], 2, 0.1, False),  # spent
        ([c("a", 0), c("b", 1, "other")], 0, 0.1, True),  # a credit for any model counts
        ([c("a", 2)], 0, 0.6, False),  # the grant expired (ttl 0.5 s)
    ],
)
def test_holds_credit(grant: list[Credit] | None, takes: int, now: float, holds: bool) -> None:
    ledger = CreditLedger()
    if grant is not None:
        ledger.update("e", grant, 0.5, 0.0)
    for _ in range(takes):
        ledger.take("m", 0.0)
    assert ledger.holds_credit(now) is holds


@pytest.mark.parametrize(
    ("grant", "takes", "now", "left"),
    [
        (None, 0, 0.0, {"a": 0}),  # never granted
        ([c("a", 1), c("b", 3)], 1, 0.1, {"a": 1, "b": 2}),  # the most left first: b
        ([c("a", 1), c("b", 3)], 3, 0.1, {"a": 0, "b": 1}),  # a spent while b holds one
        ([c("a", 2)], 0, 0.1, {"a": 2, "z": 0}),  # a replica not in the grant has none
        ([c("a", 2)], 0, 0.6, {"a": 0}),  # the grant expired (ttl 0.5 s)
    ],
)
def test_left_on_a_replica(
    grant: list[Credit] | None, takes: int, now: float, left: dict[str, int]
) -> None:
    ledger = CreditLedger()
    if grant is not None:
        ledger.update("e", grant, 0.5, 0.0)
    for _ in range(takes):
        ledger.take("m", 0.0)
    assert {app: ledger.left_on(app, now) for app in left} == left
