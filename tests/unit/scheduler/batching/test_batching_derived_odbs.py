"""DerivedODBSFormer: SLO-ordered batching bounded by memory, deadline slack and padding waste."""

from __future__ import annotations

import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.derived_odbs import DerivedODBSFormer
from services.scheduler.core.batching.estimator import BatchEstimator
from shared.profiles.defaults import default_profile

FAR = 1e6  # an SLO so loose the slack rule never binds (FAR + k orders requests by k)


def item(
    rid: str, slo: float = FAR, pred: int = 100, ctx: int = 100, arrival: float = 0.0
) -> PoolItem:
    return PoolItem(rid, ctx, pred, slo, arrival + slo, arrival)


def ids(batches: list[FormedBatch]) -> list[list[str]]:
    return [[i.request_id for i in b.items] for b in batches]


def test_toy_estimator_is_what_the_tests_assume(toy_estimator) -> None:
    est = toy_estimator()
    assert est.serve_time_s(3, 100, 100) == pytest.approx(3.0)
    assert (est.max_batch(100, 100), est.max_batch(300, 100), est.max_batch(100, 10)) == (5, 2, 9)


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        # 5 requests of 100 + 100 tokens fill the 1000-token cache; the sixth opens a new batch.
        (
            [item(f"r{k}", slo=FAR + k) for k in range(7)],
            [[f"r{k}" for k in range(5)], ["r5", "r6"]],
        ),
        # The long context pads the batch: 3 requests of 300 + 100 tokens need 1200 > 1000.
        (
            [item("a", FAR + 1), item("b", FAR + 2), item("c", FAR + 3, ctx=300)],
            [["a", "b"], ["c"]],
        ),
        # A long prediction raises the iterations: 3·(100 + 250) = 1050 > 1000 (waste 1 − 450/750
        # = 0.4 is within the default 0.5, and the deadlines are far).
        (
            [item("a", FAR + 1), item("b", FAR + 2), item("c", FAR + 3, pred=250)],
            [["a", "b"], ["c"]],
        ),
    ],
    ids=["count", "padded-context", "iterations"],
)
def test_memory_rule(pool: list[PoolItem], expected: list[list[str]], toy_estimator) -> None:
    assert ids(DerivedODBSFormer().form(pool, toy_estimator(), now_s=0.0)) == expected


@pytest.mark.parametrize(
    ("now_s", "expected"),
    [
        # b is the tightest (slack 2.5 s): a joins (2 requests → 2.0 s <= 2.5), c does not (3.0).
        (0.0, [["b", "a"], ["c"]]),
        # One second later b's slack is 1.5 s < 2.0 s: b goes alone, a and c share (2.0 <= 9).
        (1.0, [["b"], ["a", "c"]]),
    ],
)
def test_slack_rule(now_s: float, expected: list[list[str]], toy_estimator) -> None:
    pool = [item("a", slo=10.0), item("b", slo=2.5), item("c", slo=10.0)]
    assert ids(DerivedODBSFormer().form(pool, toy_estimator(), now_s)) == expected


def test_slack_uses_absolute_deadlines_not_slo(toy_estimator) -> None:
    # Same SLO, but "old" arrived 8 s ago: its deadline is 2.5 s away, so the pair (2.0 s) fits
    # and a third (3.0 s) does not; with slo_s alone (10 s) all three would share a batch.
    pool = [item("old", slo=10.0, arrival=-7.5), item("x", slo=10.0), item("y", slo=10.0)]
    assert ids(DerivedODBSFormer().form(pool, toy_estimator(), 0.0)) == [["old", "x"], ["y"]]


def test_lone_late_request_is_still_batched(toy_estimator) -> None:
    pool = [item("late", slo=1.0), item("later", slo=2.0)]
    batches = DerivedODBSFormer().form(pool, toy_estimator(), now_s=5.0)
    # Both deadlines have passed: lost requests do not limit the batch (under overload that
    # would shrink every batch to one request), so they share one instead of being dropped.
    assert ids(batches) == [["late", "later"]]
    assert batches[0].est_time_s == pytest.approx(toy_estimator().serve_time_s(2, 100, 100))


@pytest.mark.parametrize(
    ("max_waste", "slice_iterations", "expected"),
    [
        # c: 1 − 210/300 = 0.30, d: 1 − 220/400 = 0.45 admitted; e: 1 − 230/500 = 0.54 is not.
        (0.5, None, [["a", "b", "c", "d"], ["e"]]),
        # At 0.25 c already wastes too much; c, d, e (equal lengths) waste nothing together.
        (0.25, None, [["a", "b"], ["c", "d", "e"]]),
        # Sliced at 10 iterations every member decodes all 10 slots: no waste, one batch.
        (0.0, 10, [["a", "b", "c", "d", "e"]]),
    ],
)
def test_waste_rule(
    max_waste: float, slice_iterations: int | None, expected: list[list[str]], toy_estimator
) -> None:
    slos = {"a": FAR + 1, "b": FAR + 2, "c": FAR + 3, "d": FAR + 4, "e": FAR + 5}
    pool = [item(r, s, pred=100 if r in "ab" else 10) for r, s in slos.items()]
    former = DerivedODBSFormer(max_waste, slice_iterations)
    batches = former.form(pool, toy_estimator(), 0.0)
    assert ids(batches) == expected
    for b in batches:
        assert former.padding_waste(list(b.items)) <= max_waste


def test_padding_waste_formula() -> None:
    items = [item("a", pred=100), item("b", pred=40), item("c", pred=10)]
    assert DerivedODBSFormer().padding_waste(items) == pytest.approx(1 - 150 / 300)
    assert DerivedODBSFormer(slice_iterations=40).padding_waste(items) == pytest.approx(
        1 - 90 / 120
    )


@pytest.mark.parametrize("slice_iterations", [None, 32])
def test_every_item_once_and_estimates_consistent(slice_iterations: int | None) -> None:
    est = BatchEstimator(default_profile("A100-80GB", "llama-2-13b"))
    pool = [
        item(f"r{k}", slo=5 + (k * 7) % 60, pred=1 + (k * 53) % 600, ctx=50 + (k * 97) % 1500)
        for k in range(40)
    ]
    former = DerivedODBSFormer(slice_iterations=slice_iterations)
    batches = former.form(pool, est, now_s=0.0)
    flat = [i.request_id for b in batches for i in b.items]
    assert sorted(flat) == sorted(i.request_id for i in pool)
    assert len(flat) == len(set(flat))
    assert any(b.size > 1 for b in batches)
    for b in batches:
        assert b.iterations == (slice_iterations or max(i.predicted_output_tokens for i in b.items))
        assert b.est_time_s == est.serve_time_s(b.size, b.padded_len, b.iterations)
        if b.size > 1:
            assert est.fits(b.size, b.padded_len, b.iterations)
            slack = min(i.deadline_abs_s for i in b.items)
            assert b.est_time_s <= slack


def test_name_and_empty_pool(toy_estimator) -> None:
    former = DerivedODBSFormer()
    assert former.name == "slo-odbs-derived"
    assert former.form([], toy_estimator(), 0.0) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_padding_waste": -0.1}, r"max_padding_waste must be in \[0, 1\]"),
        ({"max_padding_waste": 1.5}, r"max_padding_waste must be in \[0, 1\]"),
        ({"slice_iterations": 0}, "slice_iterations must be None or >= 1"),
    ],
)
def test_validation(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DerivedODBSFormer(**kwargs)
