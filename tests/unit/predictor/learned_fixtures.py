"""Synthetic prompt/length data and a small, fast learned predictor for the predictor tests."""

from __future__ import annotations

import numpy as np

from services.predictor.core.learned.dataset import LengthExample, approx_tokens
from services.predictor.core.learned.features import FeatureConfig
from services.predictor.core.learned.predictor import LearnedConfig, LearnedPredictor
from services.predictor.core.learned.training import TrainConfig, train_learned
from shared.domain import SLO, Request

TOPICS = [
    "cats", "the ocean", "tax law", "rust traits", "jazz", "volcanoes", "chess", "bread",
    "mars", "poetry", "trains", "coffee", "bees", "glaciers", "opera", "soccer", "tea",
    "dragons", "clouds", "castles", "robots", "forests", "pirates", "deserts",
]  # fmt: skip

SMALL = TrainConfig(
    features=FeatureConfig(text_hash_bits=10, category_hash_bits=6),
    epochs=8,
    calibration_folds=2,
)
"""A training config small enough for unit tests."""


def long_prompt(topic: str) -> str:
    return f"Write a long essay about {topic}, with many sections"


def short_prompt(topic: str) -> str:
    return f"Answer yes or no: is {topic} interesting?"


def synthetic_examples(seed: int = 0, topics: list[str] | None = None) -> list[LengthExample]:
    """Essay prompts answered at length (900-1400 tokens), yes/no prompts in 3-12 tokens."""
    rng = np.random.default_rng(seed)
    out = []
    for topic in topics or TOPICS:
        for model in ("m1", "m2"):
            for prompt, lo, hi in ((long_prompt(topic), 900, 1400), (short_prompt(topic), 3, 12)):
                tokens = int(rng.integers(lo, hi))
                out.append(LengthExample(prompt, model, approx_tokens(prompt), tokens))
    return out


def train_small(seed: int = 0, runtime: LearnedConfig | None = None) -> LearnedPredictor:
    return train_learned(synthetic_examples(seed), SMALL, seed=seed, runtime=runtime)


def request(
    model: str = "m1",
    prompt: str = "",
    max_tokens: int = 8192,
    request_id: str = "r",
    tenant: str = "default",
    slo_class: str = "default",
) -> Request:
    return Request(
        request_id=request_id,
        model=model,
        input_tokens=approx_tokens(prompt) if prompt else 10,
        max_tokens=max_tokens,
        arrival_s=0.0,
        slo=SLO(ttft_deadline_s=1.0, class_name=slo_class),
        tenant=tenant,
    )
