"""The input lines of `slomesh predictor predict` and `replay`: schema and checked reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from slomesh.cli.errors import UsageError, describe

MODEL_HELP = "model file (default: the shipped services/predictor/models/default.npz)"


class PredictInput(BaseModel):
    """One input line of `slomesh predictor predict` (other fields are passed through)."""

    model_config = ConfigDict(extra="allow", strict=True)

    prompt: str = Field(min_length=1)
    """The prompt text."""
    model: str = Field(default="default", min_length=1)
    """Model that will answer."""
    max_tokens: int | None = Field(default=None, ge=1)
    """Generation cap (None: the last bucket bound, i.e. uncapped)."""
    slo_class: str = Field(default="default", min_length=1)
    """SLO class of the request."""
    tenant: str = Field(default="default", min_length=1)
    """Tenant / application."""
    input_tokens: int | None = Field(default=None, ge=1)
    """Prompt length in tokens (None: counted as words x 1.3)."""


InputT = TypeVar("InputT", bound=PredictInput)


def read_inputs(path: Path, schema: type[InputT]) -> list[tuple[dict[str, Any], InputT]]:
    """Every line of `path` checked against `schema` (PredictInput or a subclass), before any
    output: a bad line raises UsageError naming the line number, the field and the rule."""
    if not path.is_file():
        raise UsageError(f"--in: no file at {path}")
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UsageError(f"{path} line {n}: not valid JSON ({e.msg})") from e
            if not isinstance(obj, dict):
                raise UsageError(f"{path} line {n}: must be a JSON object")
            try:
                rows.append((obj, schema.model_validate(obj)))
            except ValidationError as e:
                raise UsageError(f"{path} line {n}: {describe(e)}") from e
    return rows
