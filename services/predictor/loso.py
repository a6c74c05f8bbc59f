"""Leave-one-source-out evaluation of the learned predictor's offline prior (times predictions).

For each source (the examples' tenant: arena-hard, gsm8k, fastchat in the shipped data) a model
is trained, calibration included, on every *other* source and evaluated on the held-out one:
its prompts, its wording and its tenant are all unseen, and so are the models that answer only
there. This is what a deployment meets on traffic unlike the training data, before it has
learned anything online (the prompt-level split of `evaluation.py` shares all of these).

Per source: Kendall tau, MAE, p50/p90 coverage of the learned model over the held-out rows
(one batch, its wall time per request), its one-request-at-a-time latency, and the per-model
mean and input-length regression baselines fitted on the same training sources.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.predictor.core.learned.baselines import InputLengthRegression, PerModelMean
from services.predictor.core.learned.dataset import LengthExample, example_request
from services.predictor.core.learned.metrics import MetricRow, evaluate, from_distributions
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.core.learned.training import TrainConfig, train_learned
from services.predictor.evaluation import EVAL_BUCKET_UPPER_TOKENS

UNBATCHED_REQUESTS = 200
"""Held-out requests predicted one at a time for the latency figure."""


@dataclass(frozen=True)
class SourceResult:
    """One held-out source: its sizes, the learned model's row and the baselines' rows."""

    source: str
    train_examples: int
    test_examples: int
    test_models: int
    unseen_models: list[str]
    learned: MetricRow
    unbatched_ms_per_request: float
    baselines: list[MetricRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "train_examples": self.train_examples,
            "test_examples": self.test_examples,
            "test_models": self.test_models,
            "unseen_models": self.unseen_models,
            "learned": self.learned.to_dict(),
            "unbatched_ms_per_request": self.unbatched_ms_per_request,
            "baselines": [b.to_dict() for b in self.baselines],
        }


def sources_of(examples: Sequence[LengthExample]) -> list[str]:
    """The distinct sources (tenants) of `examples`, in first-seen order."""
    return list(dict.fromkeys(e.tenant for e in examples))


def split_source(
    examples: Sequence[LengthExample], source: str
) -> tuple[list[LengthExample], list[LengthExample]]:
    """(every other source, `source`), order kept."""
    train = [e for e in examples if e.tenant != source]
    test = [e for e in examples if e.tenant == source]
    if not test:
        raise ValueError(f"loso: no examples of source {source!r} (have {sources_of(examples)})")
    if not train:
        raise ValueError(f"loso: source {source!r} is the only one; nothing to train on")
    return train, test


def evaluate_held_out(
    model: LearnedPredictor, train: Sequence[LengthExample], test: Sequence[LengthExample]
) -> tuple[MetricRow, float, list[MetricRow]]:
    """(learned row, one-at-a-time ms/request, baseline rows) of `model` on `test`."""
    upper = EVAL_BUCKET_UPPER_TOKENS
    truth = [e.output_tokens for e in test]
    top = model.upper[-1]
    requests = [example_request(e, i, top) for i, e in enumerate(test)]
    prompts = [e.prompt for e in test]
    start = time.perf_counter()
    dists = model.predict_batch(requests, prompts)
    ms = (time.perf_counter() - start) * 1000.0 / len(test)
    row = evaluate("learned", truth, from_distributions(dists, upper), upper, ms)
    k = min(UNBATCHED_REQUESTS, len(test))
    start = time.perf_counter()
    for r, p in zip(requests[:k], prompts[:k], strict=True):
        model.predict(r, p)
    unbatched = (time.perf_counter() - start) * 1000.0 / k
    baselines = []
    for b in (PerModelMean(upper), InputLengthRegression(upper)):
        b.fit(train)
        baselines.append(evaluate(b.name, truth, b.predict_batch(test), upper))
    return row, unbatched, baselines


def leave_one_source_out(
    examples: Sequence[LengthExample],
    config: TrainConfig | None = None,
    seed: int = 0,
    sources: Sequence[str] | None = None,
    on_model: Callable[[str, LearnedPredictor], None] | None = None,
) -> list[SourceResult]:
    """Train on all sources but one, evaluate on that one, for each of `sources` (None: all).

    `on_model(source, model)` gets each trained model (e.g. to save it for a replay)."""
    results = []
    for source in sources or sources_of(examples):
        train, test = split_source(examples, source)
        model = train_learned(
            train, config, seed, info={"loso_held_out_source": source, "split": {"by": "source"}}
        )
        if on_model is not None:
            on_model(source, model)
        seen = {e.model for e in train}
        row, unbatched, baselines = evaluate_held_out(model, train, test)
        results.append(
            SourceResult(
                source=source,
                train_examples=len(train),
                test_examples=len(test),
                test_models=len({e.model for e in test}),
                unseen_models=sorted({e.model for e in test} - seen),
                learned=row,
                unbatched_ms_per_request=unbatched,
                baselines=baselines,
            )
        )
    return results


def _tau(r: MetricRow) -> str:
    return "n/a" if r.kendall_tau is None else f"{r.kendall_tau:.3f}"


def markdown_table(results: Sequence[SourceResult]) -> str:
    """The results as a markdown table (one row per held-out source)."""
    lines = [
        "| held-out source | train / test rows | unseen models | Kendall tau | MAE (tokens) "
        "| p50 cov | p90 cov | ms/request batched | ms/request one at a time "
        "| tau per-model mean | tau input-length reg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        m = r.learned
        lines.append(
            f"| {r.source} | {r.train_examples} / {r.test_examples} "
            f"| {len(r.unseen_models)} of {r.test_models} "
            f"| {_tau(m)} | {m.mae_tokens:.1f} | {m.p50_coverage:.3f} | {m.p90_coverage:.3f} "
            f"| {m.ms_per_request or 0.0:.4f} | {r.unbatched_ms_per_request:.3f} "
            f"| {_tau(r.baselines[0])} | {_tau(r.baselines[1])} |"
        )
    return "\n".join(lines)
