"""The ingress's background predictor work, sent in batches.

Two kinds of predictor call leave the hot path: the prediction of a fast-path request, made
after its first token (fast_path.py; nobody waits for its answer: it opens the request's
`predict` span and keeps the feature row its completion is learned with), and the completion
itself (`Observe`). One call each per request cost the ingress and the predictor a Serve
handle round trip per item (~2 ms of CPU on each side on a busy 2-core host, more than the
prediction). Here they queue, and one `predictor.Batch` call carries every waiting item: sent
once `max_items` wait, else `interval_ms` after the first one. A call carries its predictions
first, then its observations, each kind in the order it came (`predictions_first`): the
predictor runs a run of predictions as one pass (one feature pass and matrix product), and
with predictions and completions interleaved as requests overlap, each prediction was a pass
of its own. A request's prediction is queued before its completion, so it still comes first;
a prediction no longer learns from the completions queued in the same call (at most
`interval_ms` old). One call is in flight at a time, so the predictor runs calls in order.
Best effort as the single calls were: a failed call drops its items (counted in `dropped`).

The queue is bounded (`max_queued_items`): while the predictor is slow or away, calls fail
only after their deadline and items keep coming, so an unbounded list grew with the traffic.
An item that finds the queue full is dropped at once (`dropped_full`); every drop is reported
to `on_drop(reason, count)` (the deployment exports it as `slomesh_predictor_feed_dropped_total`
with `reason` "queue_full" or "call_failed").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.rpc.slomesh.v1 import common_pb2, predictor_pb2


class PredictorFeedConfig(BaseModel):
    """How the ingress batches its background predictor calls."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    max_items: int = Field(default=256, ge=1)
    """Items one predictor.Batch call carries at most; a full batch is sent at once."""
    interval_ms: float = Field(default=500.0, ge=0.0)
    """How long the first waiting item waits for others before the batch is sent (0: at the
    next turn of the event loop, so items queued together still share a call). Nobody waits
    for these items, and each call costs both sides a Serve handle round trip, so the wait is
    long: a few calls a second whatever the request rate."""
    max_queued_items: int = Field(default=4096, ge=1)
    """Items waiting at most (not counting the batch in flight); an item beyond it is dropped
    at once (best effort: a lost prediction or observation only slows learning)."""


QUEUE_FULL = "queue_full"
CALL_FAILED = "call_failed"
"""`reason` values of a drop."""


def serve_drop_counter() -> Callable[[str, int], None]:
    """`on_drop` exporting drops as the counter `slomesh_predictor_feed_dropped_total{reason}`
    through Ray Serve's metrics (inside a Serve replica)."""
    from ray.serve import metrics

    counter = metrics.Counter(
        "slomesh_predictor_feed_dropped_total",
        "predictor feed items dropped: queue_full (the bounded queue was full), call_failed "
        "(their predictor.Batch call failed)",
        tag_keys=("reason",),
    )

    def on_drop(reason: str, count: int) -> None:
        counter.inc(count, tags={"reason": reason})

    return on_drop


def predictions_first(
    items: list[predictor_pb2.PredictorWork],
) -> list[predictor_pb2.PredictorWork]:
    """`items`' predictions, then the rest, each in the order given (module docstring)."""
    predictions = [i for i in items if i.WhichOneof("work") == "predict"]
    if len(predictions) in (0, len(items)):
        return items
    return predictions + [i for i in items if i.WhichOneof("work") != "predict"]


class PredictorFeed:
    """Queue of predictor work items, sent as `predictor.Batch` calls (module docstring)."""

    def __init__(
        self,
        send: Callable[[predictor_pb2.PredictorBatch], Awaitable[Any]],
        config: PredictorFeedConfig | None = None,
    ) -> None:
        self._send = send
        self.config = config or PredictorFeedConfig()
        self._items: list[predictor_pb2.PredictorWork] = []
        self._full: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        """Items delivered in a batch call that succeeded."""
        self.dropped = 0
        """Items lost with a failed call."""
        self.dropped_full = 0
        """Items refused because the queue held max_queued_items."""
        self.on_drop: Callable[[str, int], None] | None = None
        """Told of every drop: (reason, items)."""
        self.calls = 0
        """predictor.Batch calls made."""

    def predict(
        self, meta: common_pb2.RequestMeta, prompt: str, trace_headers: Mapping[str, str]
    ) -> None:
        """Queue a prediction nobody waits for (its span joins the trace of `trace_headers`)."""
        request = predictor_pb2.PredictRequest(meta=meta, prompt=prompt)
        self._add(predictor_pb2.PredictorWork(predict=request, trace_headers=dict(trace_headers)))

    def observe(self, meta: common_pb2.RequestMeta, output_tokens: int) -> None:
        """Queue a completion to learn from."""
        observation = predictor_pb2.Observation(meta=meta, output_tokens=output_tokens)
        self._add(predictor_pb2.PredictorWork(observe=observation))

    @property
    def waiting(self) -> int:
        """Items queued and not yet sent."""
        return len(self._items)

    def _add(self, item: predictor_pb2.PredictorWork) -> None:
        if len(self._items) >= self.config.max_queued_items:
            self.dropped_full += 1
            self._report_drop(QUEUE_FULL, 1)
            return
        self._items.append(item)
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task.get_loop() is not loop:
            self._task = None  # its loop is gone (an Event binds to the loop that waits on it)
        if self._full is None or self._task is None:
            self._full = asyncio.Event()
        if len(self._items) >= self.config.max_items:
            self._full.set()
        if self._task is None or self._task.done():
            # the sender below returns only once the queue is empty, without awaiting after
            # its last check, so an item added here is never left behind by a finishing sender
            self._task = loop.create_task(self._run())

    async def _run(self) -> None:
        assert self._full is not None
        while self._items:
            if len(self._items) < self.config.max_items:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.config.interval_ms / 1e3):
                        await self._full.wait()
            self._full.clear()
            batch = self._items[: self.config.max_items]
            del self._items[: len(batch)]
            batch = predictions_first(batch)
            if len(self._items) >= self.config.max_items:
                self._full.set()
            self.calls += 1
            try:
                await self._send(predictor_pb2.PredictorBatch(items=batch))
                self.sent += len(batch)
            except Exception:
                self.dropped += len(batch)
                self._report_drop(CALL_FAILED, len(batch))

    def _report_drop(self, reason: str, count: int) -> None:
        if self.on_drop is not None:
            with contextlib.suppress(Exception):  # a metrics fault must not break the feed
                self.on_drop(reason, count)

    async def drain(self) -> None:
        """Wait until every queued item was sent (or dropped)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
