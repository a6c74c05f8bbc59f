"""How the registry builds one predictor implementation.

The interface itself is shared/domain/length_prediction.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.domain.length_prediction import LengthPredictor


@dataclass(frozen=True, slots=True)
class PredictorKind:
    """How to build one implementation: from a config mapping (None: defaults) or a state()."""

    name: str
    create: Callable[[Mapping[str, Any] | None], LengthPredictor]
    restore: Callable[[Mapping[str, Any]], LengthPredictor]
