"""An OpenAI request (its admission view, core/request_view.py) to the control plane's
`Request` metadata: `admission_request`. `estimate_tokens` counts a prompt for models without a
tokenizer. No clock: the caller passes arrival_s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.auth import Principal
from services.ingress.core.errors import model_not_found
from services.ingress.core.json_body import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_JSON_DEPTH
from services.ingress.core.request_view import RequestView
from shared.domain import SLO, Request


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A served model as admission needs it: its name and context length in tokens."""

    name: str
    max_model_len: int
    base: str | None = None
    """For a LoRA adapter's name: the base model it runs on (None: `name` is a base model)."""

    def __post_init__(self) -> None:
        if self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")


class AdmissionConfig(BaseModel):
    """Admission knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_priority: int = -1000
    """Lowest body priority kept (vLLM's meaning: lower is served first); lower ones count as
    this (vLLM accepts any integer)."""
    max_priority: int = 1000
    """Highest body priority kept; higher ones count as this."""
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    """Largest HTTP request body accepted, bytes; a larger one is 413 before it is parsed."""
    max_json_depth: int = Field(DEFAULT_MAX_JSON_DEPTH, ge=4)
    """Deepest nesting of JSON arrays/objects accepted in a body; deeper is 400 (checked
    without recursion, before parsing). OpenAI bodies need 4."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_priority > self.max_priority:
            raise ValueError("min_priority must be <= max_priority")
        return self


def admission_request(
    *,
    request_id: str,
    view: RequestView,
    principal: Principal,
    slo: SLO,
    prompt_tokens: int,
    models: Mapping[str, ModelInfo],
    arrival_s: float,
    config: AdmissionConfig | None = None,
) -> Request:
    """The request's control-plane metadata. 404 (vLLM's answer, naming the base models as the
    valid aliases, not the adapters) for a model this mesh does not serve; everything else
    vLLM checks itself on the replica (its own 400s), so admission only bounds what it plans
    on: the prompt within the context, the output budget the client asked for (or the context
    left, vLLM's default) within what is left of it, the body's priority within the configured
    range. `n` choices count as one request (the predictor's estimate is per choice)."""
    cfg = config if config is not None else AdmissionConfig()
    info = models.get(view.model)
    if info is None:
        raise model_not_found(view.model, [n for n, m in models.items() if m.base is None])
    limit = info.max_model_len
    prompt = max(1, min(prompt_tokens, limit - 1))
    left = limit - prompt
    asked = view.max_tokens if view.max_tokens is not None and view.max_tokens >= 1 else left
    return Request(
        request_id=request_id,
        model=info.base or view.model,
        adapter=view.model if info.base else None,
        input_tokens=prompt,
        max_tokens=max(1, min(asked, left)),
        arrival_s=arrival_s,
        slo=slo,
        tenant=principal.tenant,
        priority=max(cfg.min_priority, min(cfg.max_priority, view.priority)),
    )


def estimate_tokens(text: str) -> int:
    """Prompt tokens of `text` for a model without a tokenizer:
    max(ceil(1.3 x words), ceil(UTF-8 bytes / 4)), at least 1.

    Words alone (whitespace-separated) undercount text without spaces: a 1 MB run of letters
    is one word, 2 tokens by words, while any BPE tokenizer makes ~250,000 tokens of it. The
    byte term bounds that: English averages ~4 bytes per token, and non-Latin scripts take 2-4
    UTF-8 bytes per character, so they count more per character too. In English prose (5-6
    bytes per word, its space included) the two terms agree within ~10%, so ordinary prompts
    count about as before."""
    words = math.ceil(1.3 * len(text.split()))
    size = math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)
    return max(1, words, size)
