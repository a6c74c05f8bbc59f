"""DerivedODBSFormer's overload switches: lost requests last, slack rule off."""

from __future__ import annotations

import pytest

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.derived_odbs import DerivedODBSFormer


def item(rid: str, slo: float, pred: int = 100, ctx: int = 100) -> PoolItem:
    return PoolItem(rid, ctx, pred, slo, slo, 0.0)


def ids(batches: list[FormedBatch]) -> list[list[str]]:
    return [[i.request_id for i in b.items] for b in batches]


# toy estimator: T_serve(N, L, S) = 0.01·N·S s, 5 requests of 100 + 100 tokens fill the cache;
# alone a request of 100 predicted tokens takes 1.0 s, so SLOs below 1 s are lost at t = 0
LOST = [item("lost1", 0.5), item("lost2", 0.6), item("lost3", 0.7)]
SAVABLE = [item("a", 10.0), item("b", 10.0), item("c", 10.0)]


@pytest.mark.parametrize(
    ("kwargs", "pool", "expected"),
    [
        # SLO order: the lost requests open the first batch, c waits for the second
        ({}, LOST + SAVABLE, [["lost1", "lost2", "lost3", "a", "b"], ["c"]]),
        # lost last: every savable request rides the first batch
        ({"lost_last": True}, LOST + SAVABLE, [["a", "b", "c", "lost1", "lost2"], ["lost3"]]),
        # slack rule on: b's 2.5 s slack caps its batch at 2 requests (2.0 s)
        ({}, [item("a", 10.0), item("b", 2.5), item("c", 10.0)], [["b", "a"], ["c"]]),
        # slack rule off: memory and waste only
        (
            {"slack_limit": False},
            [item("a", 10.0), item("b", 2.5), item("c", 10.0)],
            [["b", "a", "c"]],
        ),
    ],
    ids=["slo-order", "lost-last", "slack-on", "slack-off"],
)
def test_overload_switches(kwargs, pool, expected, toy_estimator) -> None:
    former = DerivedODBSFormer(**kwargs)
    batches = former.form(pool, toy_estimator(), now_s=0.0)
    assert ids(batches) == expected
    assert sorted(r for b in ids(batches) for r in b) == sorted(i.request_id for i in pool)
