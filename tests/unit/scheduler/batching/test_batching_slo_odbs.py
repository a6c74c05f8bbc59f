"""UELLM SLO-ODBS (Algorithm 1) and its ablations: hand-computed batch boundaries."""

from __future__ import annotations

import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.slo_odbs import SLOODBSFormer, odbs, slo_dbs
from shared.profiles.defaults import default_profile


@pytest.fixture(scope="module")
def estimator() -> BatchEstimator:
    return BatchEstimator(default_profile("A100-80GB", "llama-2-13b"))


def item(rid: str, slo: float, length: int, ctx: int = 100, arrival: float = 0.0) -> PoolItem:
    return PoolItem(rid, ctx, length, slo, arrival + slo, arrival)


def ids(batches: list[FormedBatch]) -> list[list[str]]:
    return [[i.request_id for i in b.items] for b in batches]


# Small constants so each Total is easy to compute by hand: Total = T_l + T_o, threshold 100.
UNIT = {"threshold": 100.0, "l1": 1.0, "l2": 1.0, "max_batch_size": 3}

# T_o closes: b joins a (T_l=(2+1)·2=6, T_o=|40−10|·2=60, 66 <= 100);
# c does not (T_l=(3+2)·3=15, T_o=|5−40|·3=105, 120 > 100). A signed T_o (−105) would admit c.
LENGTH_SPLIT = [item("a", 1, 10), item("b", 2, 40), item("c", 3, 5)]
# T_l closes: b joins a (T_l=(20+10)·2=60, T_o=0); c does not (T_l=(30+20)·3=150 > 100).
SLO_SPLIT = [item("a", 10, 10), item("b", 20, 10), item("c", 30, 10)]
# Cap: Totals are tiny (T_l <= (1+1)·3=6) but the fourth request exceeds max_batch_size=3.
CAPPED = [item(r, 1, 10) for r in "abcd"]


@pytest.mark.parametrize(
    ("former", "pool", "expected"),
    [
        (SLOODBSFormer(w1=1.0, w2=1.0, **UNIT), LENGTH_SPLIT, [["a", "b"], ["c"]]),
        (SLOODBSFormer(w1=1.0, w2=1.0, **UNIT), SLO_SPLIT, [["a", "b"], ["c"]]),
        (SLOODBSFormer(w1=1.0, w2=1.0, **UNIT), CAPPED, [["a", "b", "c"], ["d"]]),
        # SLO-DBS ignores lengths: the T_o split disappears, the T_l split stays.
        (slo_dbs(**UNIT), LENGTH_SPLIT, [["a", "b", "c"]]),
        (slo_dbs(**UNIT), SLO_SPLIT, [["a", "b"], ["c"]]),
        # ODBS ignores SLOs: the T_l split disappears, the T_o split stays.
        (odbs(w2=1.0, **UNIT), SLO_SPLIT, [["a", "b", "c"]]),
        (odbs(w2=1.0, **UNIT), LENGTH_SPLIT, [["a", "b"], ["c"]]),
        # Weights scale the terms: halving w2 brings c's Total to 15 + 52.5 = 67.5 <= 100.
        (SLOODBSFormer(w1=1.0, w2=0.5, **UNIT), LENGTH_SPLIT, [["a", "b", "c"]]),
    ],
    ids=[
        "to-closes",
        "tl-closes",
        "cap",
        "slo-dbs-ignores-length",
        "slo-dbs-keeps-slo",
        "odbs-ignores-slo",
        "odbs-keeps-length",
        "w2-scales",
    ],
)
def test_batch_boundaries(
    former: SLOODBSFormer,
    pool: list[PoolItem],
    expected: list[list[str]],
    estimator: BatchEstimator,
) -> None:
    batches = former.form(list(reversed(pool)), estimator, now_s=0.0)
    assert ids(batches) == expected


def test_total_matches_the_formula() -> None:
    former = SLOODBSFormer(w1=2.0, w2=0.5, threshold=1.0, l1=3.0, l2=0.1)
    q = item("q", 4.0, 30)
    # w1·(4+6)·3·3 + w2·|30−50|·3·0.1 = 2·90 + 0.5·6 = 183
    assert former.total(q, n=2, l_cm=6.0, o_cm=50) == pytest.approx(183.0)


@pytest.mark.parametrize(
    ("threshold", "pool", "expected"),
    [
        # O_CM is the batch's maximum: b (len 10) joins a (len 200) at 6 + 190·2 = 386 <= 400;
        # c (len 200) is charged |200−200| (15 <= 400), not |200−10|·3 = 570 against b's length.
        (400.0, [item("a", 1, 200), item("b", 2, 10), item("c", 3, 200)], [["a", "b", "c"]]),
        # O_CM resets to the opener's length: b closes (6 + 380 > 100 at threshold 100), then c
        # is charged |10−10| against b, not |10−200|·2 = 380 against the closed batch.
        (100.0, [item("a", 1, 200), item("b", 2, 10), item("c", 3, 10)], [["a"], ["b", "c"]]),
    ],
    ids=["max-not-last", "reset-on-close"],
)
def test_o_cm_tracks_the_current_batch(
    threshold: float, pool: list[PoolItem], expected: list[list[str]], estimator: BatchEstimator
) -> None:
    former = SLOODBSFormer(w1=1.0, w2=1.0, threshold=threshold, l1=1.0, l2=1.0)
    assert ids(former.form(pool, estimator, 0.0)) == expected


def test_sorted_by_slo_then_arrival_then_id(estimator: BatchEstimator) -> None:
    pool = [
        item("late", 9, 10, arrival=0.0),
        item("z", 2, 10, arrival=1.0),
        item("y", 2, 10, arrival=1.0),
        item("x", 2, 10, arrival=0.5),
        item("first", 1, 10, arrival=3.0),
    ]
    former = SLOODBSFormer(threshold=1e9, max_batch_size=10)
    assert ids(former.form(pool, estimator, 0.0)) == [["first", "x", "y", "z", "late"]]


def test_first_request_always_opens_a_batch(estimator: BatchEstimator) -> None:
    # Alone each has a Total far over the threshold (T_l >= 1000·2), yet each is served.
    pool = [item("x", 1000, 10), item("y", 1000, 10)]
    batches = SLOODBSFormer(threshold=1.0).form(pool, estimator, 0.0)
    assert ids(batches) == [["x"], ["y"]]


def test_paper_preset_is_fixed_chunks_of_ten(estimator: BatchEstimator) -> None:
    # SLOs in seconds (1-350 s in the paper): at 10 requests of SLO 300 s and equal lengths
    # T_l = 600·10·1.2 = 7200 <= 15000, so the cap of 10 binds first.
    pool = [item(f"r{k:02d}", 300, 200) for k in range(23)]
    batches = SLOODBSFormer().form(pool, estimator, 0.0)
    assert [b.size for b in batches] == [10, 10, 3]


def test_paper_preset_length_term_binds(estimator: BatchEstimator) -> None:
    # Preset: b joins (T_l=(2+1)·2·1.2=7.2, 0.5·|6000−100|·2·1.2=7080); c does not:
    # T_l=(3+2)·3·1.2=18, 0.5·|100−6000|·3·1.2=10620 -> 10638 <= 15000 joins; d at n=3:
    # T_l=(4+3)·4·1.2=33.6, 0.5·5900·4·1.2=14160 -> 14193.6 <= 15000 joins; e at n=4:
    # 0.5·5900·5·1.2=17700 > 15000 closes.
    pool = [item("a", 1, 100), item("b", 2, 6000), item("c", 3, 100)]
    pool += [item("d", 4, 100), item("e", 5, 100)]
    former = SLOODBSFormer()
    assert (former.w1, former.w2, former.threshold) == (1.0, 0.5, 15000.0)
    assert (former.l1, former.l2, former.max_batch_size) == (1.2, 1.2, 10)
    assert ids(former.form(pool, estimator, 0.0)) == [["a", "b", "c", "d"], ["e"]]


@pytest.mark.parametrize("slice_iterations", [None, 16])
def test_every_item_once_and_estimates_consistent(
    estimator: BatchEstimator, slice_iterations: int | None
) -> None:
    pool = [
        item(f"r{k}", slo=1 + (k * 37) % 90, length=1 + (k * 53) % 700, ctx=20 + (k * 31) % 400)
        for k in range(40)
    ]
    former = SLOODBSFormer(threshold=3000.0, slice_iterations=slice_iterations)
    batches = former.form(pool, estimator, now_s=0.0)
    flat = [i.request_id for b in batches for i in b.items]
    assert sorted(flat) == sorted(i.request_id for i in pool)
    assert len(flat) == len(set(flat))
    assert len(batches) > 4  # the threshold, not only the cap, split this pool
    for b in batches:
        assert b.padded_len == max(i.context_tokens for i in b.items)
        longest = max(i.predicted_output_tokens for i in b.items)
        assert b.iterations == (slice_iterations or longest)
        assert b.est_time_s == estimator.serve_time_s(b.size, b.padded_len, b.iterations)


def test_factories_and_names() -> None:
    assert (SLOODBSFormer().name, slo_dbs().name, odbs().name) == ("slo-odbs", "slo-dbs", "odbs")
    assert (slo_dbs().w1, slo_dbs().w2) == (1.0, 0.0)
    assert (odbs().w1, odbs().w2) == (0.0, 0.5)
    assert slo_dbs(max_batch_size=4, slice_iterations=8).slice_iterations == 8


def test_empty_pool(estimator: BatchEstimator) -> None:
    assert SLOODBSFormer().form([], estimator, 0.0) == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"w1": -1.0}, "w1"),
        ({"w2": -0.1}, "w2"),
        ({"threshold": -1.0}, "threshold"),
        ({"l1": -1.0}, "l1"),
        ({"l2": -1.0}, "l2"),
        ({"max_batch_size": 0}, "max_batch_size"),
        ({"slice_iterations": 0}, "slice_iterations"),
    ],
)
def test_validation(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SLOODBSFormer(**kwargs)
