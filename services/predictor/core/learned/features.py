"""Feature rows of the learned length predictor: hashed prompt n-grams, metadata, history.

One row per request, a sparse CSR matrix with three blocks (hashed, so a row never needs a fitted
vocabulary and the model can keep learning online on n-grams it has never seen):

1. text, 2^text_hash_bits columns: word n-grams of the prompt, hashed (sklearn
   HashingVectorizer), L2-normalised and scaled by `word_weight`. Long prompts keep their head
   and tail (`prompt_head_chars`, `prompt_tail_chars`): the instruction is usually at one end.
   Empty when the prompt is unknown.
2. categories, 2^category_hash_bits columns: one-hot hashed "model=<name>", the name's parts
   ("model_part=vicuna", "model_part=7b": unseen models share their family's weights) and
   "slo=<class>" (not emitted for "default", so an SLO class only gets a weight from online data);
   with `model_input_slopes`, the model and part names again, valued by the scaled log input
   length (a per-model input-length slope).
   The tenant is not a category: it enters through the history features only.
3. dense: log input length (centred, scaled), its square, a no-prompt flag, scaled counts of the
   prompt (characters, lines, numbers, question marks, code fences), the three history
   features (history.py) and, from feature_version 2, the instruction features
   (instruction.py: task verbs, requested format and size, a rewrite's input length).

feature_version 2 also splits model names where letters meet digits and drops the dot inside a
version ("gpt35" and "gpt-3.5-turbo" share the parts "gpt" and "35"). Version 1 files (no
instruction block, the old model-name parts) still load and predict as they did.

max_tokens is not a feature: it caps the predicted distribution (distribution.summarize).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import HashingVectorizer

from services.predictor.core.learned.history import HISTORY_FEATURES
from services.predictor.core.learned.instruction import (
    INSTRUCTION_FEATURES,
    instruction_features,
)

_TEXT_STATS = 5
DENSE_FEATURES = 3 + _TEXT_STATS + HISTORY_FEATURES
"""Columns of the dense block of feature_version 1 (version 2 adds INSTRUCTION_FEATURES)."""

FEATURE_VERSION: Literal[1, 2] = 2
"""The feature layout new models are trained with (FeatureConfig.feature_version)."""

_LOG_INPUT_CENTRE = 4.0
_LOG_INPUT_SCALE = 1.5
_MODEL_SPLIT = re.compile(r"[-_/.:@ ]+")
_VERSION_DOT = re.compile(r"(?<=\d)\.(?=\d)")
_LETTER_DIGIT = re.compile(r"(?<=[a-z])(?=\d)")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


class FeatureConfig(BaseModel):
    """How requests become feature rows (recorded in the model file; fixed after training)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    feature_version: Literal[1, 2] = FEATURE_VERSION
    """Feature layout: 1 (n-grams, metadata, counts, history), 2 (also the instruction block
    and split model-name parts). A model file without this field is version 1."""

    text_hash_bits: int = Field(default=14, ge=6, le=20)
    """log2 of the text block's width (hashed n-gram slots)."""

    word_ngram_max: int = Field(default=2, ge=1, le=3)
    """Word n-grams of length 1..this."""

    word_weight: float = Field(default=3.0, gt=0.0)
    """Scale of the L2-normalised text block (larger: the text is regularised less)."""

    model_input_slopes: bool = True
    """Add hashed per-model (and per-name-part) copies of the scaled log input length, so each
    model family gets its own input-length slope."""

    category_hash_bits: int = Field(default=10, ge=4, le=16)
    """log2 of the category block's width."""

    prompt_head_chars: int = Field(default=2000, ge=1)
    """Characters kept from the start of a long prompt."""

    prompt_tail_chars: int = Field(default=1000, ge=0)
    """Characters kept from the end of a long prompt."""

    @property
    def n_features(self) -> int:
        """Total row width."""
        return (1 << self.text_hash_bits) + (1 << self.category_hash_bits) + self.dense_features

    @property
    def dense_features(self) -> int:
        """Width of the dense block."""
        return DENSE_FEATURES + (INSTRUCTION_FEATURES if self.feature_version >= 2 else 0)


class Featurizer:
    """Builds feature rows for a FeatureConfig (stateless; safe to share)."""

    def __init__(self, config: FeatureConfig) -> None:
        self.config = config
        self._words = HashingVectorizer(
            n_features=2**config.text_hash_bits,
            ngram_range=(1, config.word_ngram_max),
            alternate_sign=False,
            norm=None,  # normalised here: sklearn's normalize() costs ~0.5 ms a call
            dtype=np.float64,
        )
        self._cats = FeatureHasher(
            n_features=2**config.category_hash_bits, input_type="pair", alternate_sign=False
        )

    def _clip(self, prompt: str) -> str:
        head, tail = self.config.prompt_head_chars, self.config.prompt_tail_chars
        if len(prompt) <= head + tail:
            return prompt
        return prompt[:head] + " " + (prompt[-tail:] if tail else "")

    def transform(
        self,
        prompts: Sequence[str | None],
        models: Sequence[str],
        slo_classes: Sequence[str],
        input_tokens: Sequence[int] | NDArray[np.int64],
        history: NDArray[np.float64],
    ) -> sp.csr_matrix:
        """Rows for n requests; `history` is the n x 3 output of LengthHistory.features."""
        return self.blocks(prompts, models, slo_classes, input_tokens, history).matrix()

    def blocks(
        self,
        prompts: Sequence[str | None],
        models: Sequence[str],
        slo_classes: Sequence[str],
        input_tokens: Sequence[int] | NDArray[np.int64],
        history: NDArray[np.float64],
    ) -> FeatureBlocks:
        """The rows of `transform`, block by block (cheaper to multiply than to stack)."""
        n = len(prompts)
        if not (len(models) == len(slo_classes) == len(input_tokens) == n):
            raise ValueError(
                "features: prompts, models, slo_classes, input_tokens differ in length"
            )
        if history.shape != (n, HISTORY_FEATURES):
            raise ValueError(f"features: history must be {n} x {HISTORY_FEATURES}")
        texts = [self._clip(p) if p else "" for p in prompts]
        text = _l2_rows(self._words.transform(texts), self.config.word_weight)
        log_in = (
            np.log(np.maximum(np.asarray(input_tokens, dtype=np.float64), 1.0)) - _LOG_INPUT_CENTRE
        ) / _LOG_INPUT_SCALE
        slopes = self.config.model_input_slopes
        version2 = self.config.feature_version >= 2
        split = _model_parts_v2 if version2 else _model_parts_v1
        cats = self._cats.transform(
            _category_tokens(m, c, float(z) if slopes else None, split)
            for m, c, z in zip(models, slo_classes, log_in, strict=True)
        )
        no_prompt = np.asarray([0.0 if p else 1.0 for p in prompts])
        stats = np.asarray([_text_stats(p) for p in prompts]).reshape(n, _TEXT_STATS)
        cols = [log_in, log_in**2, no_prompt, stats, history]
        if version2:
            cols.append(
                np.asarray([instruction_features(p) for p in prompts]).reshape(
                    n, INSTRUCTION_FEATURES
                )
            )
        dense = np.column_stack(cols)
        return FeatureBlocks(text, cats, dense)


@dataclass(frozen=True, eq=False)
class FeatureBlocks:
    """Feature rows as their three blocks: text and categories (CSR) and dense columns."""

    text: sp.csr_matrix
    cats: sp.csr_matrix
    dense: NDArray[np.float64]

    def matrix(self) -> sp.csr_matrix:
        """The rows as one CSR matrix (text | categories | dense)."""
        dense = sp.csr_matrix(self.dense)
        return sp.hstack([self.text, self.cats, dense], format="csr", dtype=np.float64)

    def dot(self, w: NDArray[np.float64]) -> NDArray[np.float64]:
        """rows @ w for a (row width x k) dense w, without stacking the blocks."""
        nt, nc = self.text.shape[1], self.cats.shape[1]
        out: NDArray[np.float64] = (
            np.asarray(self.text @ w[:nt]) + np.asarray(self.cats @ w[nt : nt + nc])
        ) + self.dense @ w[nt + nc :]
        return out

    def row(self, i: int) -> FeatureBlocks:
        """Row i alone."""
        return FeatureBlocks(self.text[i], self.cats[i], self.dense[i : i + 1])


def _l2_rows(x: sp.csr_matrix, scale: float) -> sp.csr_matrix:
    """x with every non-zero row scaled to L2 norm `scale` (in place)."""
    counts = np.diff(x.indptr)
    rows = np.repeat(np.arange(x.shape[0]), counts)
    norms = np.sqrt(np.bincount(rows, weights=x.data**2, minlength=x.shape[0]))
    x.data *= scale / norms[rows]
    return x


def _model_parts_v1(model: str) -> list[str]:
    return [part for part in _MODEL_SPLIT.split(model.lower()) if part]


def _model_parts_v2(model: str) -> list[str]:
    """Parts of a model name: "gpt-3.5-turbo" -> gpt, 35, turbo; "gpt35" -> gpt, 35."""
    name = _LETTER_DIGIT.sub("-", _VERSION_DOT.sub("", model.lower()))
    return list(dict.fromkeys(part for part in _MODEL_SPLIT.split(name) if part))


def _category_tokens(
    model: str, slo_class: str, log_in: float | None, split: Callable[[str], list[str]]
) -> list[tuple[str, float]]:
    names = [f"model={model}"]
    names += [f"model_part={part}" for part in split(model)]
    tokens = [(name, 1.0) for name in names]
    if log_in is not None:
        tokens += [(f"{name}*log_in", log_in) for name in names]
    if slo_class != "default":
        tokens.append((f"slo={slo_class}", 1.0))
    return tokens


def _text_stats(prompt: str | None) -> tuple[float, ...]:
    """Scaled counts of the prompt: log chars, lines, numbers, question marks, code fences."""
    if not prompt:
        return (0.0,) * _TEXT_STATS
    return (
        math.log1p(len(prompt)) / 8.0,
        math.log1p(prompt.count("\n")) / 3.0,
        math.log1p(len(_NUMBER.findall(prompt))) / 3.0,
        math.log1p(prompt.count("?")) / 2.0,
        1.0 if "```" in prompt else 0.0,
    )
