"""Held-out metrics and baselines by hand, and the shipped model on real held-out data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from services.predictor.core import create_predictor
from services.predictor.core.learned.baselines import (
    GlobalMean,
    InputLengthRegression,
    PerModelMean,
)
from services.predictor.core.learned.dataset import (
    LengthExample,
    approx_tokens,
    example_request,
    split_by_prompt,
)
from services.predictor.core.learned.metrics import (
    BatchPrediction,
    evaluate,
    from_distributions,
    markdown_table,
)
from services.predictor.core.learned.predictor import LearnedPredictor
from services.predictor.data import DEFAULT_DATA_DIR, load_llm_responses
from services.predictor.model_store import DEFAULT_MODEL_PATH

UPPER = (10, 100, 1000)


def test_metrics_by_hand() -> None:
    truth = [5, 50, 500, 2000]
    pred = BatchPrediction(
        mean=np.asarray([15.0, 40.0, 600.0, 1000.0]),
        p50=np.asarray([5.0, 60.0, 400.0, 900.0]),
        p90=np.asarray([9.0, 90.0, 900.0, 1000.0]),
        bucket=np.asarray([0, 1, 1, 2]),
    )
    row = evaluate("x", truth, pred, UPPER, ms_per_request=0.5)
    assert row.mae_tokens == pytest.approx((10 + 10 + 100 + 1000) / 4)
    assert row.kendall_tau == pytest.approx(1.0)
    assert row.bucket_accuracy == pytest.approx(3 / 4)  # 2000 is in the last bucket
    assert row.p50_coverage == pytest.approx(2 / 4)
    assert row.p90_coverage == pytest.approx(3 / 4)
    table = markdown_table([row, evaluate("const", truth, _const(4), UPPER)])
    assert "| x | 4 | 280.0 | 1.000 | 0.750 | 0.500 | 0.750 | 0.5000 |" in table
    assert "| const | 4 |" in table and "n/a" in table  # tau of a constant is undefined


def _const(n: int) -> BatchPrediction:
    return BatchPrediction(np.full(n, 1.0), np.full(n, 1.0), np.full(n, 2.0), np.zeros(n, int))


def ex(model: str, input_tokens: int, output_tokens: int) -> LengthExample:
    return LengthExample(
        f"p{model}{input_tokens}{output_tokens}", model, input_tokens, output_tokens
    )


@pytest.mark.parametrize(
    ("baseline", "query", "mean"),
    [
        (GlobalMean, ex("a", 10, 1), (40 * 10 + 30 * 100 + 200) / 71),
        (PerModelMean, ex("a", 10, 1), 10.0),
        (PerModelMean, ex("b", 10, 1), 100.0),
        (PerModelMean, ex("rare", 10, 1), (40 * 10 + 30 * 100 + 200) / 71),
        (InputLengthRegression, ex("b", 7, 1), 100.0),
        (InputLengthRegression, ex("a", 7, 1), 10.0),
    ],
)
def test_baselines_by_hand(baseline: type, query: LengthExample, mean: float) -> None:
    train = (
        [ex("a", i, 10) for i in range(1, 41)]
        + [ex("b", i, 100) for i in range(1, 31)]
        + [ex("rare", 5, 200)]
    )
    b = baseline(UPPER)
    b.fit(train)
    pred = b.predict_batch([query])
    assert pred.mean[0] == pytest.approx(mean)
    assert pred.p50[0] <= pred.p90[0]


def test_input_length_regression_follows_the_input() -> None:
    train = [ex("a", i, 3 * i + 5) for i in range(1, 60)]
    b = InputLengthRegression(UPPER)
    b.fit(train)
    assert b.predict_batch([ex("a", 100, 1)]).mean[0] == pytest.approx(305.0)


def test_token_count_is_words_times_1_3() -> None:
    assert approx_tokens("one two three four five six seven eight nine ten") == 13
    assert approx_tokens("") == 1


def test_shipped_model_loads_and_ranks_held_out_data() -> None:
    assert DEFAULT_MODEL_PATH.is_file(), "run `slomesh predictor train` to ship the model"
    assert DEFAULT_MODEL_PATH.stat().st_size < 2_000_000
    model = create_predictor("learned")
    assert isinstance(model, LearnedPredictor)
    assert model.version == f"learned:{model.model_id}+0"
    if not Path(DEFAULT_DATA_DIR).is_dir():
        pytest.skip("../shared/data not available")
    split = model.info["split"]
    _, test = split_by_prompt(load_llm_responses(), split["test_fraction"], split["seed"])
    sample = test[::6]
    reqs = [example_request(e, i, 8192) for i, e in enumerate(sample)]
    dists = model.predict_batch(reqs, [e.prompt for e in sample])
    truth = np.asarray([e.output_tokens for e in sample])
    pred = from_distributions(dists, model.upper)
    assert float(kendalltau(pred.mean, truth).statistic) > 0.3
    assert 0.7 < float(np.mean(truth <= pred.p90)) < 0.99
    assert all(d.p50_tokens <= d.p90_tokens for d in dists)
