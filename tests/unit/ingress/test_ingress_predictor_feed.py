"""The ingress's batched predictor feed (predictor_feed.py): every queued item reaches the
predictor once, in the order it was queued, in calls of at most max_items, one call at a time;
a failed call drops (and counts) only its own items."""

from __future__ import annotations

import asyncio
import random

import pytest

from services.ingress.predictor_feed import PredictorFeed, PredictorFeedConfig
from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2


class Predictor:
    """Records Batch calls; `fail` holds the indices of calls that raise; each call takes
    `delay_s` (other items queue meanwhile); flags two calls in flight at once."""

    def __init__(self, fail: tuple[int, ...] = (), delay_s: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.fail = fail
        self.delay_s = delay_s
        self.in_flight = 0
        self.overlapped = False

    async def send(self, batch: predictor_pb2.PredictorBatch) -> None:
        self.in_flight += 1
        self.overlapped |= self.in_flight > 1
        try:
            await asyncio.sleep(self.delay_s)
            index = len(self.batches)
            self.batches.append([_label(item) for item in batch.items])
            if index in self.fail:
                raise RuntimeError("predictor unavailable")
        finally:
            self.in_flight -= 1


def _label(item: predictor_pb2.PredictorWork) -> str:
    kind = item.WhichOneof("work")
    part = item.predict if kind == "predict" else item.observe
    return f"{kind[0]}:{part.meta.request_id}"


def _meta(i: int) -> common_pb2.RequestMeta:
    return common_pb2.RequestMeta(request_id=f"r{i}", model="m")


async def _feed_items(feed: PredictorFeed, n: int, seed: int, pause_every: int) -> list[str]:
    """Queue n requests' predict + observe items, with random pauses between some of them."""
    rng = random.Random(seed)
    queued = []
    for i in range(n):
        feed.predict(_meta(i), "prompt", {"traceparent": f"00-{i:032x}-{i:016x}-01"})
        queued.append(f"p:r{i}")
        if pause_every and i % pause_every == 0:
            await asyncio.sleep(rng.uniform(0.0, 0.004))
        feed.observe(_meta(i), i + 1)
        queued.append(f"o:r{i}")
    await feed.drain()
    return queued


@pytest.mark.parametrize(
    ("n", "max_items", "interval_ms", "delay_s", "pause_every"),
    [
        (1, 64, 1.0, 0.0, 0),  # a lone item goes after the interval
        (40, 8, 2.0, 0.0, 0),  # a burst: full batches go at once
        (40, 8, 2.0, 0.003, 3),  # items queue while a call is in flight
        (25, 64, 1.0, 0.002, 2),  # trickle: batches by time
        (10, 1, 0.0, 0.0, 1),  # one item a call
        (30, 7, 0.0, 0.001, 4),  # interval 0: what queued in the same turn shares a call
    ],
)
def test_every_item_arrives_once_in_order_in_bounded_calls(
    n: int, max_items: int, interval_ms: float, delay_s: float, pause_every: int
) -> None:
    predictor = Predictor(delay_s=delay_s)
    config = PredictorFeedConfig(max_items=max_items, interval_ms=interval_ms)

    async def run() -> tuple[list[str], PredictorFeed]:
        feed = PredictorFeed(predictor.send, config)
        return await _feed_items(feed, n, seed=n, pause_every=pause_every), feed

    queued, feed = asyncio.run(run())
    received = [label for batch in predictor.batches for label in batch]
    assert received == queued  # none lost, none twice, order kept
    assert all(1 <= len(b) <= max_items for b in predictor.batches)
    assert not predictor.overlapped  # one call in flight at a time
    assert (feed.sent, feed.dropped, feed.waiting) == (2 * n, 0, 0)
    assert feed.calls == len(predictor.batches)
    if pause_every == 0 and max_items > 1:
        assert len(predictor.batches) == -(-2 * n // max_items)  # a burst fills its batches


@pytest.mark.parametrize(("fail", "dropped"), [((0,), 4), ((1,), 4), ((0, 2), 8), ((), 0)])
def test_a_failed_call_drops_only_its_items(fail: tuple[int, ...], dropped: int) -> None:
    predictor = Predictor(fail=fail)
    config = PredictorFeedConfig(max_items=4, interval_ms=1.0)

    async def run() -> PredictorFeed:
        feed = PredictorFeed(predictor.send, config)
        await _feed_items(feed, 6, seed=0, pause_every=0)
        return feed

    feed = asyncio.run(run())
    assert [len(b) for b in predictor.batches] == [4, 4, 4]
    assert (feed.sent, feed.dropped) == (12 - dropped, dropped)


def test_prediction_items_carry_the_trace_and_the_prompt() -> None:
    seen: list[predictor_pb2.PredictorBatch] = []

    async def send(batch: predictor_pb2.PredictorBatch) -> None:
        seen.append(batch)

    async def run() -> None:
        feed = PredictorFeed(send, PredictorFeedConfig(interval_ms=0.0))
        feed.predict(_meta(1), "the prompt", {"traceparent": "00-ab-cd-01"})
        feed.observe(_meta(1), 17)
        await feed.drain()

    asyncio.run(run())
    (batch,) = seen
    predict, observe = batch.items
    assert predict.predict.prompt == "the prompt"
    assert dict(predict.trace_headers) == {"traceparent": "00-ab-cd-01"}
    assert observe.observe.output_tokens == 17
    assert not observe.trace_headers
