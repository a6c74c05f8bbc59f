"""Admission-time validation: a validated OpenAI request to the control plane's `Request` metadata.

`build_request_meta` checks what needs the model registry and the tokenizer's count (model served,
max_tokens within the context, prompt + completion within the context, priority range) and
fills the default max_tokens. `estimate_tokens` counts a prompt for models without a tokenizer.
`render_chat` is the plain-text fallback for models whose tokenizer
has no chat template. No clock: the caller passes arrival_s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.auth import Principal
from services.ingress.core.errors import bad_request, context_too_long, model_not_found
from services.ingress.core.json_body import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_JSON_DEPTH
from services.ingress.core.openai_schema import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
)
from shared.domain import SLO, Request


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A served model as admission needs it: its name and context length in tokens."""

    name: str
    max_model_len: int

    def __post_init__(self) -> None:
        if self.max_model_len < 2:
            raise ValueError(f"max_model_len must be >= 2, got {self.max_model_len}")


class AdmissionConfig(BaseModel):
    """Admission knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_max_tokens: int = Field(256, ge=1)
    """max_tokens when the client sends none (capped by the context left after the prompt)."""
    min_priority: int = -1000
    """Lowest priority a request may carry (lower is served first)."""
    max_priority: int = 1000
    """Highest priority a request may carry."""
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


def build_request_meta(
    *,
    request_id: str,
    body: CompletionRequest | ChatCompletionRequest,
    principal: Principal,
    slo: SLO,
    prompt_tokens: int,
    models: Mapping[str, ModelInfo],
    arrival_s: float,
    config: AdmissionConfig | None = None,
) -> Request:
    """The request's control-plane metadata, or APIError: 404 for an unknown model (listing the
    served ones); 400 for max_tokens < 1 or > max_model_len (param "max_tokens", or
    "max_completion_tokens" when that was sent), an empty prompt, prompt + max_tokens over the
    context (code context_length_exceeded), or priority outside the configured range."""
    cfg = config if config is not None else AdmissionConfig()
    info = models.get(body.model)
    if info is None:
        raise model_not_found(body.model, list(models))
    prompt_param: Literal["messages", "prompt"] = (
        "messages" if isinstance(body, ChatCompletionRequest) else "prompt"
    )
    if prompt_tokens < 1:
        raise bad_request(prompt_param, f"must contain at least one token, got {prompt_tokens}")
    if not cfg.min_priority <= body.priority <= cfg.max_priority:
        raise bad_request(
            "priority",
            f"must be between {cfg.min_priority} and {cfg.max_priority}, got {body.priority}",
        )
    limit = info.max_model_len
    requested = body.requested_max_tokens
    if requested is None:
        remaining = limit - prompt_tokens
        if remaining < 1:
            raise context_too_long(prompt_param, prompt_tokens, None, limit)
        max_tokens = min(remaining, cfg.default_max_tokens)
    else:
        tokens_param = (
            "max_completion_tokens"
            if isinstance(body, ChatCompletionRequest) and body.max_completion_tokens is not None
            else "max_tokens"
        )
        if requested < 1:
            raise bad_request(tokens_param, f"must be >= 1, got {requested}")
        if requested > limit:
            raise bad_request(
                tokens_param,
                f"must be <= {limit} (the context length of model '{info.name}'), got {requested}",
            )
        if prompt_tokens + requested > limit:
            raise context_too_long(prompt_param, prompt_tokens, requested, limit)
        max_tokens = requested
    return Request(
        request_id=request_id,
        model=body.model,
        input_tokens=prompt_tokens,
        max_tokens=max_tokens,
        arrival_s=arrival_s,
        slo=slo,
        tenant=principal.tenant,
        priority=body.priority,
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


def render_chat(messages: Sequence[ChatMessage]) -> str:
    """Plain-text fallback for a tokenizer without a chat template: one "role: content" line per
    message, then "assistant:" as the generation prompt."""
    lines = [f"{m.role}: {m.content}" for m in messages]
    lines.append("assistant:")
    return "\n".join(lines)
