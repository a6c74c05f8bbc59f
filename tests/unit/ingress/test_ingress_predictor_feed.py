"""The ingress's batched predictor feed (predictor_feed.py): every queued item reaches the
predictor once, in calls of at most max_items, one call at a time, each call's predictions
before its observations and each kind in the order it was queued (a request's prediction
before its completion); a failed call drops (and counts) only its own items."""

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
    assert sorted(received) == sorted(queued)  # none lost, none twice
    for kind in ("p:", "o:"):  # each kind in the order queued
        assert [x for x in received if x.startswith(kind)] == [
            x for x in queued if x.startswith(kind)
        ]
    for batch in predictor.batches:  # a call's predictions first
        assert batch == sorted(batch, key=lambda x: not x.startswith("p:"))
    assert all(received.index(f"p:r{i}") < received.index(f"o:r{i}") for i in range(n))
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


@pytest.mark.parametrize(("queued_cap", "n_items"), [(5, 40), (1, 10), (64, 20)])
def test_a_stalled_predictor_bounds_the_queue_and_counts_every_drop(
    queued_cap: int, n_items: int
) -> None:
    """A predictor that does not answer: the queue never holds more than max_queued_items
    (plus the one batch in flight), the rest is dropped at once and reported by reason."""
    release = asyncio.Event()
    sent: list[list[str]] = []

    async def stalled(batch: predictor_pb2.PredictorBatch) -> None:
        await release.wait()
        sent.append([_label(item) for item in batch.items])

    drops: list[tuple[str, int]] = []

    async def run() -> PredictorFeed:
        config = PredictorFeedConfig(max_items=4, interval_ms=0.0, max_queued_items=queued_cap)
        feed = PredictorFeed(stalled, config)
        feed.on_drop = lambda reason, count: drops.append((reason, count))
        for i in range(n_items):
            feed.observe(_meta(i), i)
            await asyncio.sleep(0)  # the sender takes its first batch and waits on the call
            assert feed.waiting <= queued_cap
        release.set()
        await feed.drain()
        return feed

    feed = asyncio.run(run())
    delivered = sum(len(b) for b in sent)
    assert delivered + feed.dropped_full == n_items
    assert feed.dropped_full == sum(c for r, c in drops if r == "queue_full")
    assert delivered <= queued_cap + 4  # the queue, plus the one batch that was in flight
    assert feed.dropped_full >= n_items - queued_cap - 4
    assert feed.dropped == 0 and all(r == "queue_full" for r, _ in drops)


def test_a_failed_call_is_reported_as_call_failed_and_a_broken_hook_is_harmless() -> None:
    predictor = Predictor(fail=(0,))
    reasons: list[tuple[str, int]] = []

    def hook(reason: str, count: int) -> None:
        reasons.append((reason, count))
        raise RuntimeError("metrics exporter down")

    async def run() -> PredictorFeed:
        feed = PredictorFeed(predictor.send, PredictorFeedConfig(max_items=3, interval_ms=0.0))
        feed.on_drop = hook
        await _feed_items(feed, 3, seed=1, pause_every=0)
        return feed

    feed = asyncio.run(run())
    assert reasons == [("call_failed", 3)]
    assert (feed.sent, feed.dropped) == (3, 3)


def test_a_calls_predictions_go_before_its_observations_in_queue_order() -> None:
    predictor = Predictor()
    config = PredictorFeedConfig(max_items=64, interval_ms=1.0)

    async def run() -> None:
        feed = PredictorFeed(predictor.send, config)
        feed.predict(_meta(0), "prompt", {})
        feed.predict(_meta(1), "prompt", {})
        feed.observe(_meta(0), 3)  # requests overlap: completions and predictions interleave
        feed.predict(_meta(2), "prompt", {})
        feed.observe(_meta(1), 4)
        feed.observe(_meta(2), 5)
        await feed.drain()

    asyncio.run(run())
    assert predictor.batches == [["p:r0", "p:r1", "p:r2", "o:r0", "o:r1", "o:r2"]]
