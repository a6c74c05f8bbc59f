"""Training the learned predictor offline from LengthExamples (pure; the seed is injected).

1. Fit: bucket labels from the output lengths; history features leave-one-out (each
   row sees the per-model and per-(tenant, model) means of the *other* prompts, counts capped at
   the history's saturation, as a live predictor would); some rows get a cold history (unseen
   model, or unseen tenant: serving tenants never appear in training) and some rows are repeated
   without their prompt (metadata-only requests). `epochs` shuffled partial_fit passes.
2. Calibrate a temperature T (grid over 0.5..4) by cross-validation over the training prompts
   (`calibration_folds` folds by prompt): each fold is predicted by a model fitted on the other
   folds (history from those folds), and T is the one whose p90 covers a share of the
   out-of-fold lengths nearest the middle of `p90_coverage_band` (calibration.py).
   (Two 15% validation splits gave p90 coverages of 0.90 and 0.93 at the same T, depending on the
   split, so every training prompt is used.)
3. The model is fitted on all training examples and given T.

Bucket centres are the mean output length (capped at the last bound) of the training examples in
each bucket (the bucket midpoint where a bucket is empty).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.predictor.core.learned.calibration import fit_temperature
from services.predictor.core.learned.dataset import (
    TOKENIZER,
    LengthExample,
    examples_digest,
    split_folds,
)
from services.predictor.core.learned.features import FeatureConfig, Featurizer
from services.predictor.core.learned.history import LengthHistory, shrunk_features
from services.predictor.core.learned.ordinal import OrdinalSGD
from services.predictor.core.learned.predictor import LearnedConfig, LearnedPredictor
from shared.domain.length_distribution import (
    bucket_midpoints,
    check_bucket_bounds,
)

HALF_OCTAVE_BUCKET_UPPER_TOKENS: tuple[int, ...] = tuple(
    round(16 * 2 ** (i / 2)) for i in range(19)
)
"""16, 23, 32, 45, 64, ..., 5793, 8192: the default buckets (16 .. 8192) each split in two at the
geometric midpoint. The finer buckets make the within-bucket shape matter less for the quantiles
(with the default buckets the p90 over-covered on validation data)."""


class TrainConfig(BaseModel):
    """Settings of one training run (recorded in the model file)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    features: FeatureConfig = FeatureConfig()
    """Feature rows (fixed for the model's life)."""

    bucket_upper_tokens: tuple[int, ...] = HALF_OCTAVE_BUCKET_UPPER_TOKENS
    """Inclusive bucket upper bounds in tokens, strictly ascending."""

    alpha: float = Field(default=3e-4, gt=0.0)
    """L2 regularisation of every threshold classifier (also sets the 'optimal' SGD steps)."""

    epochs: int = Field(default=12, ge=1)
    """Shuffled partial_fit passes over the training rows."""

    calibration_folds: int = Field(default=3, ge=2)
    """Folds (by prompt) of the cross-validation whose out-of-fold predictions calibrate T."""

    prompt_dropout: float = Field(default=0.3, ge=0.0, le=1.0)
    """Share of training rows repeated without their prompt (metadata-only requests)."""

    cold_model_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    """Share of training rows whose history is empty (an unseen model and tenant)."""

    cold_tenant_fraction: float = Field(default=0.4, ge=0.0, le=1.0)
    """Share of training rows whose tenant history is empty (a known model, unseen tenant)."""

    history_half_life_observations: float = Field(default=500.0, gt=0.0)
    """Half-life of the tenant history's decayed means (history.py)."""

    history_prior_strength: float = Field(default=20.0, gt=0.0)
    """Pseudo-observations shrinking history means towards the wider mean."""

    min_prob: float = Field(default=1e-4, gt=0.0, lt=0.1)
    """Floor of every bucket probability."""

    p90_coverage_band: tuple[float, float] = (0.88, 0.92)
    """Calibration: the temperature whose out-of-fold p90 coverage is nearest this band's
    middle (ties: the least out-of-fold log loss)."""

    @field_validator("bucket_upper_tokens")
    @classmethod
    def _check_buckets(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        check_bucket_bounds(v)
        return v


def bucket_indices(upper: Sequence[int], tokens: NDArray[np.int64]) -> NDArray[np.int64]:
    """Bucket of each length (longer than the last bound: the last bucket)."""
    idx = np.searchsorted(np.asarray(upper), tokens, side="left")
    return np.minimum(idx, len(upper) - 1).astype(np.int64)


def bucket_centres(upper: Sequence[int], tokens: NDArray[np.int64]) -> NDArray[np.float64]:
    """Mean length (capped at the last bound) inside each bucket; the midpoint where empty."""
    idx = bucket_indices(upper, tokens)
    capped = np.minimum(tokens, upper[-1]).astype(np.float64)
    counts = np.bincount(idx, minlength=len(upper)).astype(np.float64)
    sums = np.bincount(idx, weights=capped, minlength=len(upper))
    out: NDArray[np.float64] = np.divide(
        sums, counts, out=bucket_midpoints(upper), where=counts > 0
    )
    return out


def leave_one_out_counts(
    examples: Sequence[LengthExample], saturation: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per example: (model count, model log sum, (tenant, model) count, log sum) over the *other*
    prompts' completions, counts capped at `saturation` (the sums scaled alike)."""
    logs = np.log(np.asarray([e.output_tokens for e in examples], dtype=np.float64))

    def totals(keys: Sequence[Any]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        acc: dict[Any, list[float]] = {}
        for k, y in zip(keys, logs, strict=True):
            a = acc.setdefault(k, [0.0, 0.0])
            a[0] += 1.0
            a[1] += float(y)
        return np.asarray([acc[k][0] for k in keys]), np.asarray([acc[k][1] for k in keys])

    n_g, s_g = totals([(e.tenant, e.model, e.prompt) for e in examples])
    out = []
    for keys in ([e.model for e in examples], [(e.tenant, e.model) for e in examples]):
        n, s = totals(keys)
        n, s = n - n_g, s - s_g
        scale = np.where(n > saturation, saturation / np.maximum(n, 1e-12), 1.0)
        out += [n * scale, s * scale]
    return out[0], out[1], out[2], out[3]


def _new_history(examples: Sequence[LengthExample], cfg: TrainConfig) -> LengthHistory:
    mean = float(np.mean(np.log([e.output_tokens for e in examples])))
    history = LengthHistory(mean, cfg.history_half_life_observations, cfg.history_prior_strength)
    history.seed(
        [e.tenant for e in examples],
        [e.model for e in examples],
        [e.output_tokens for e in examples],
    )
    return history


def _training_rows(
    examples: Sequence[LengthExample],
    cfg: TrainConfig,
    history: LengthHistory,
    featurizer: Featurizer,
    rng: np.random.Generator,
) -> tuple[sp.csr_matrix, NDArray[np.int64]]:
    """Feature rows (leave-one-out history, cold histories, prompt-less repeats) and buckets."""
    n = len(examples)
    nm, sm, nt, st = leave_one_out_counts(examples, history.saturation)
    u = rng.random(n)
    cold_model = u < cfg.cold_model_fraction
    cold_tenant = u < cfg.cold_model_fraction + cfg.cold_tenant_fraction
    nm, sm = np.where(cold_model, 0.0, nm), np.where(cold_model, 0.0, sm)
    nt, st = np.where(cold_tenant, 0.0, nt), np.where(cold_tenant, 0.0, st)
    hist = shrunk_features(nm, sm, nt, st, history.global_mean, history.prior_strength)
    drop = rng.random(n) < cfg.prompt_dropout
    rows_ex = [*examples, *(e for e, d in zip(examples, drop, strict=True) if d)]
    prompts: list[str | None] = [e.prompt for e in examples] + [None] * int(drop.sum())
    x = featurizer.transform(
        prompts,
        [e.model for e in rows_ex],
        [e.slo_class for e in rows_ex],
        [e.input_tokens for e in rows_ex],
        np.vstack([hist, hist[drop]]),
    )
    y = bucket_indices(cfg.bucket_upper_tokens, np.asarray([e.output_tokens for e in rows_ex]))
    return x, y


def _fit(examples: Sequence[LengthExample], cfg: TrainConfig, seed: int) -> LearnedPredictor:
    """An uncalibrated predictor (T = 1) fitted on `examples`."""
    rng = np.random.default_rng(seed)
    history = _new_history(examples, cfg)
    featurizer = Featurizer(cfg.features)
    x, y = _training_rows(examples, cfg, history, featurizer, rng)
    ordinal = OrdinalSGD(
        len(cfg.bucket_upper_tokens), cfg.features.n_features, cfg.alpha, seed, cfg.min_prob
    )
    for _ in range(cfg.epochs):
        order = rng.permutation(x.shape[0])
        ordinal.partial_fit(x[order], y[order])
    tokens = np.asarray([e.output_tokens for e in examples], dtype=np.int64)
    centres = bucket_centres(cfg.bucket_upper_tokens, tokens)
    return LearnedPredictor(
        cfg.features,
        cfg.bucket_upper_tokens,
        centres,
        ordinal,
        history,
        "untrained",
    )


def example_rows(
    predictor: LearnedPredictor, examples: Sequence[LengthExample], with_prompt: bool = True
) -> sp.csr_matrix:
    """Feature rows of examples under the predictor's current history."""
    hist = predictor.history.features([e.tenant for e in examples], [e.model for e in examples])
    return predictor.featurizer.transform(
        [e.prompt if with_prompt else None for e in examples],
        [e.model for e in examples],
        [e.slo_class for e in examples],
        [e.input_tokens for e in examples],
        hist,
    )


def model_id(predictor: LearnedPredictor) -> str:
    """12 hex chars naming the trained weights, centres, temperature and history."""
    h = hashlib.blake2b(digest_size=6)
    for a in predictor.ordinal.arrays().values():
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(predictor.centres.tobytes())
    h.update(repr((predictor.ordinal.temperature, predictor.history.to_dict())).encode())
    return h.hexdigest()


def train_learned(
    examples: Sequence[LengthExample],
    config: TrainConfig | None = None,
    seed: int = 0,
    info: Mapping[str, Any] | None = None,
    runtime: LearnedConfig | None = None,
) -> LearnedPredictor:
    """Train and calibrate a learned predictor (module docstring).

    `info` (JSON-able) is added to the model's training info (e.g. where the data came from).
    """
    cfg = config or TrainConfig()
    if len(examples) < 10:
        raise ValueError(f"training needs at least 10 examples, got {len(examples)}")
    logits, tokens = [], []
    folds = split_folds(examples, cfg.calibration_folds, seed)
    for k, held in enumerate(folds):
        rest = [e for j, part in enumerate(folds) if j != k for e in part]
        if not held or not rest:
            raise ValueError("training: a calibration fold is empty (too few distinct prompts)")
        fold_model = _fit(rest, cfg, seed)
        logits.append(fold_model.ordinal.logits(example_rows(fold_model, held)))
        tokens.append(np.asarray([e.output_tokens for e in held], dtype=np.int64))
    model = _fit(examples, cfg, seed)
    model.ordinal.temperature = fit_temperature(
        np.vstack(logits),
        np.concatenate(tokens),
        model.ordinal,
        model.upper,
        model.centres,
        cfg.p90_coverage_band,
    )
    model.config = runtime or LearnedConfig()
    model.info = {
        "tokenizer": TOKENIZER,
        "training_data_hash": examples_digest(examples),
        "training_examples": len(examples),
        "train_config": cfg.model_dump(mode="json"),
        "seed": seed,
        **dict(info or {}),
    }
    model.model_id = model_id(model)
    return model
