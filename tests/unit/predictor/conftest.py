"""Shared fixtures of the predictor tests: one small learned predictor trained per session."""

from __future__ import annotations

import copy

import pytest
from learned_fixtures import train_small

from services.predictor.core.learned.predictor import LearnedPredictor


@pytest.fixture(scope="session")
def trained_small() -> LearnedPredictor:
    """Trained once; use the `small` fixture (a copy) in tests that change it."""
    return train_small()


@pytest.fixture
def small(trained_small: LearnedPredictor) -> LearnedPredictor:
    """A fresh copy of the small learned predictor, free to observe."""
    return copy.deepcopy(trained_small)
