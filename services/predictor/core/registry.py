"""The length-predictor registry: implementations by name, built from a config or a saved state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.predictor.core.base import PredictorKind
from services.predictor.core.online_histogram import ONLINE_HISTOGRAM
from shared.domain.length_prediction import LengthPredictor
from shared.policy import Registry


def _learned() -> PredictorKind:
    # imported on first use: the learned predictor pulls in scikit-learn; its model file is
    # read by the shell (model_store), so the pure core never does file I/O
    from services.predictor.model_store import LEARNED

    return LEARNED


PREDICTORS: Registry[PredictorKind] = Registry(
    "length predictor",
    {ONLINE_HISTOGRAM.name: lambda: ONLINE_HISTOGRAM, "learned": _learned},
)
"""Each entry yields the PredictorKind of one implementation."""


def create_predictor(name: str, config: Mapping[str, Any] | None = None) -> LengthPredictor:
    """A fresh predictor of implementation `name` (UnknownNameError lists the valid names)."""
    return PREDICTORS.create(name).create(config)


def restore_predictor(state: Mapping[str, Any]) -> LengthPredictor:
    """Rebuild a predictor from its state(); state["kind"] names the implementation."""
    kind = state.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"state.kind must name a length predictor, got {kind!r}")
    return PREDICTORS.create(kind).restore(state)
