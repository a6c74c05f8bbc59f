"""Held-out comparison of the learned predictor with the baselines (times predictions: a clock).

Every predictor is fitted (or trained) on the same train split and predicts the test split in one
batch; ms/request is that batch's wall time divided by its size. Rows:

- learned: the learned predictor with each prompt; learned (no prompt): the same without prompts;
- learned + online: requests predicted one at a time, each observed right after (prequential),
  so the model keeps learning over the test split;
- the baselines (core/learned/baselines.py) and the online-histogram predictor fed the train split.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass

from services.predictor.core.learned.baselines import (
    Baseline,
    GlobalMean,
    InputLengthRegression,
    PerModelMean,
)
from services.predictor.core.learned.dataset import LengthExample, example_request
from services.predictor.core.learned.metrics import MetricRow, evaluate, from_distributions
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.core.online_histogram import OnlineHistogramPredictor
from shared.domain import Request

EVAL_BUCKET_UPPER_TOKENS: tuple[int, ...] = tuple(16 * 2**i for i in range(10))
"""Buckets of the bucket-accuracy metric (the default 16 .. 8192), whatever a model uses."""


@dataclass(frozen=True)
class Report:
    """Metric rows plus the learned model's one-request-at-a-time latency."""

    rows: list[MetricRow]
    unbatched_ms_per_request: float
    unbatched_requests: int


def _timed_learned(
    name: str,
    predictor: LearnedPredictor,
    requests: Sequence[Request],
    prompts: Sequence[str | None],
    truth: Sequence[int],
) -> MetricRow:
    start = time.perf_counter()
    dists = predictor.predict_batch(requests, prompts)
    ms = (time.perf_counter() - start) * 1000.0 / len(requests)
    return evaluate(
        name,
        truth,
        from_distributions(dists, EVAL_BUCKET_UPPER_TOKENS),
        EVAL_BUCKET_UPPER_TOKENS,
        ms,
    )


def _timed_baseline(
    b: Baseline, train: Sequence[LengthExample], test: Sequence[LengthExample], truth: Sequence[int]
) -> MetricRow:
    b.fit(train)
    start = time.perf_counter()
    pred = b.predict_batch(test)
    ms = (time.perf_counter() - start) * 1000.0 / len(test)
    return evaluate(b.name, truth, pred, EVAL_BUCKET_UPPER_TOKENS, ms)


def _online_histogram(
    train: Sequence[LengthExample], test: Sequence[LengthExample], truth: Sequence[int]
) -> MetricRow:
    p = OnlineHistogramPredictor.from_config(None)
    top = p.config.bucket_upper_tokens[-1]
    for i, e in enumerate(train):
        p.observe(example_request(e, i, top), e.output_tokens)
    reqs = [example_request(e, i, top) for i, e in enumerate(test)]
    start = time.perf_counter()
    dists = [p.predict(r) for r in reqs]
    ms = (time.perf_counter() - start) * 1000.0 / len(test)
    pred = from_distributions(dists, EVAL_BUCKET_UPPER_TOKENS)
    return evaluate("online-histogram", truth, pred, EVAL_BUCKET_UPPER_TOKENS, ms)


def compare(
    learned: LearnedPredictor,
    train: Sequence[LengthExample],
    test: Sequence[LengthExample],
    unbatched: int = 200,
) -> Report:
    """Metrics of every predictor on `test` (module docstring); `learned` is not modified."""
    if not test:
        raise ValueError("evaluation: the test split is empty")
    truth = [e.output_tokens for e in test]
    top = learned.upper[-1]
    requests = [example_request(e, i, top) for i, e in enumerate(test)]
    prompts = [e.prompt for e in test]
    rows = [
        _timed_learned("learned", copy.deepcopy(learned), requests, prompts, truth),
        _timed_learned(
            "learned (no prompt)", copy.deepcopy(learned), requests, [None] * len(test), truth
        ),
    ]
    online = copy.deepcopy(learned)
    dists = []
    for r, prompt, y in zip(requests, prompts, truth, strict=True):
        dists.append(online.predict(r, prompt))
        online.observe(r, y)
    rows.append(
        evaluate(
            "learned + online",
            truth,
            from_distributions(dists, EVAL_BUCKET_UPPER_TOKENS),
            EVAL_BUCKET_UPPER_TOKENS,
        )
    )
    for b in (
        GlobalMean(EVAL_BUCKET_UPPER_TOKENS),
        PerModelMean(EVAL_BUCKET_UPPER_TOKENS),
        InputLengthRegression(EVAL_BUCKET_UPPER_TOKENS),
    ):
        rows.append(_timed_baseline(b, train, test, truth))
    rows.append(_online_histogram(train, test, truth))
    single = copy.deepcopy(learned)
    k = min(unbatched, len(requests))
    start = time.perf_counter()
    for r, prompt in zip(requests[:k], prompts[:k], strict=True):
        single.predict(r, prompt)
    unbatched_ms = (time.perf_counter() - start) * 1000.0 / k
    return Report(rows, unbatched_ms, k)
