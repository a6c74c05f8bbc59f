"""FIFOFormer: arrival-ordered fixed-size chunks, cut early only by memory."""

from __future__ import annotations

import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.fifo import FIFOFormer
from shared.profiles.defaults import default_profile


def item(rid: str, arrival: float, slo: float = 100.0, pred: int = 100, ctx: int = 100) -> PoolItem:
    return PoolItem(rid, ctx, pred, slo, arrival + slo, arrival)


def ids(batches: list[FormedBatch]) -> list[list[str]]:
    return [[i.request_id for i in b.items] for b in batches]


def test_arrival_order_ties_by_id_and_slo_ignored(toy_estimator) -> None:
    pool = [
        item("tight", arrival=3.0, slo=0.1),
        item("b", arrival=1.0),
        item("a", arrival=1.0),
        item("first", arrival=0.0, slo=500.0),
    ]
    batches = FIFOFormer(batch_size=2).form(pool, toy_estimator(10**6), now_s=0.0)
    assert ids(batches) == [["first", "a"], ["b", "tight"]]


@pytest.mark.parametrize(("batch_size", "sizes"), [(3, [3, 3, 1]), (1, [1] * 7), (16, [7])])
def test_fixed_chunks(batch_size: int, sizes: list[int], toy_estimator) -> None:
    pool = [item(f"r{k}", arrival=float(k)) for k in range(7)]
    batches = FIFOFormer(batch_size).form(pool, toy_estimator(10**6), 0.0)
    assert [b.size for b in batches] == sizes
    assert [i.request_id for b in batches for i in b.items] == [f"r{k}" for k in range(7)]


@pytest.mark.parametrize(
    ("pool", "expected"),
    [
        # 5 requests of 100 + 100 tokens fill the 1000-token cache before batch_size 16.
        (
            [item(f"r{k}", float(k)) for k in range(7)],
            [[f"r{k}" for k in range(5)], ["r5", "r6"]],
        ),
        # The long context pads the chunk: 3·(300 + 100) = 1200 > 1000; d follows c (2·400).
        (
            [item("a", 0), item("b", 1), item("c", 2, ctx=300), item("d", 3)],
            [["a", "b"], ["c", "d"]],
        ),
        # A long prediction raises the iterations: 3·(100 + 250) = 1050 > 1000.
        ([item("a", 0), item("b", 1), item("c", 2, pred=250)], [["a", "b"], ["c"]]),
        # The next chunk starts from its own padding: c..f (100 + 100 each) share one batch.
        (
            [item("a", 0, ctx=300), *(item(r, float(k)) for k, r in enumerate("bcdef", 1))],
            [["a", "b"], ["c", "d", "e", "f"]],
        ),
        # A request too big even alone still forms its own batch.
        ([item("a", 0), item("huge", 1, ctx=5000)], [["a"], ["huge"]]),
    ],
    ids=["count", "padded-context", "iterations", "fresh-chunk", "oversized-alone"],
)
def test_memory_cuts_chunks_early(
    pool: list[PoolItem], expected: list[list[str]], toy_estimator
) -> None:
    assert ids(FIFOFormer(batch_size=16).form(pool, toy_estimator(), 0.0)) == expected


def test_slice_bounds_iterations_for_memory(toy_estimator) -> None:
    # Sliced at 50 steps a request holds 100 + 50 tokens: 6 fit in 1000, not 5.
    pool = [item(f"r{k}", float(k), pred=400) for k in range(7)]
    batches = FIFOFormer(batch_size=16, slice_iterations=50).form(pool, toy_estimator(), 0.0)
    assert [b.size for b in batches] == [6, 1]
    assert all(b.iterations == 50 for b in batches)


@pytest.mark.parametrize("slice_iterations", [None, 64])
def test_every_item_once_and_estimates_consistent(slice_iterations: int | None) -> None:
    est = BatchEstimator(default_profile("A100-80GB", "llama-2-13b"))
    pool = [
        item(f"r{k}", arrival=(k * 13) % 17, pred=1 + (k * 53) % 900, ctx=50 + (k * 97) % 2000)
        for k in range(50)
    ]
    batches = FIFOFormer(batch_size=8, slice_iterations=slice_iterations).form(pool, est, 0.0)
    flat = [i.request_id for b in batches for i in b.items]
    assert sorted(flat) == sorted(i.request_id for i in pool)
    assert len(flat) == len(set(flat))
    for b in batches:
        assert 1 <= b.size <= 8
        assert b.padded_len == max(i.context_tokens for i in b.items)
        assert b.iterations == (slice_iterations or max(i.predicted_output_tokens for i in b.items))
        assert b.est_time_s == est.serve_time_s(b.size, b.padded_len, b.iterations)
        assert b.size == 1 or est.fits(b.size, b.padded_len, b.iterations)


def test_name_and_empty_pool(toy_estimator) -> None:
    former = FIFOFormer()
    assert (former.name, former.batch_size) == ("fifo", 16)
    assert former.form([], toy_estimator(), 0.0) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"slice_iterations": 0}, "slice_iterations must be None or >= 1"),
    ],
)
def test_validation(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FIFOFormer(**kwargs)
