"""OpenAI-compatible request models (pydantic v2) and the parsing that turns a raw body into one.

Validation is strict: a field of the wrong JSON type ("max_tokens": "5", "stream": 1) or outside
its range is a 400 naming the field; unknown fields are ignored, as OpenAI clients send many.
slomesh extensions: `priority` (criticality: higher first, negative sheddable) and `slo` (a
class name such as "interactive", or an object {ttft_ms, tpot_ms, deadline_ms}); vLLM's
`ignore_eos` (bool) forces the output length to max_tokens. Response and streaming-chunk
builders live in `openai_responses` and are re-exported here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import models_json_schema
from pydantic_core import PydanticCustomError

from services.ingress.core.errors import bad_request, from_validation_error
from services.ingress.core.json_body import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    decode_json,
)
from services.ingress.core.openai_responses import (
    SSE_DONE,
    ChunkStream,
    FinishReason,
    chat_chunk,
    chat_completion_response,
    completion_chunk,
    completion_response,
    sse,
    usage,
    usage_chunk,
)

__all__ = [
    "SSE_DONE",
    "ChatCompletionRequest",
    "ChatMessage",
    "ChunkStream",
    "CompletionRequest",
    "FinishReason",
    "SLOObject",
    "StreamOptions",
    "chat_chunk",
    "chat_completion_response",
    "completion_chunk",
    "completion_response",
    "openapi_schemas",
    "parse_body",
    "sse",
    "usage",
    "usage_chunk",
    "validate_body",
]

Role = Literal["system", "user", "assistant", "tool"]

_STRICT = ConfigDict(
    extra="ignore",
    strict=True,
    allow_inf_nan=False,
    frozen=True,
    use_attribute_docstrings=True,  # field docstrings become the OpenAPI descriptions
)

# What the JSON schema (OpenAPI) shows for fields whose before-validators accept more shapes
# than the stored type.
_STOP_JSON = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            {"type": "null"},
        ]
    }
)
_PROMPT_JSON = WithJsonSchema(
    {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 1},
        ]
    }
)
_TEXT_PART = {
    "type": "object",
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
    "required": ["type", "text"],
}
_CONTENT_JSON = WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "array", "items": _TEXT_PART}, {"type": "null"}]}
)


def _null_content_for_assistant_only(schema: dict[str, Any]) -> None:
    """ChatMessage's JSON schema: content may be null only when role is assistant."""
    schema["anyOf"] = [
        {"properties": {"role": {"const": "assistant"}}},
        {"properties": {"content": {"not": {"type": "null"}}}},
    ]


class SLOObject(BaseModel):
    """Explicit objectives in a request body's `slo` field, milliseconds. A field left out means
    no objective of that kind, except TTFT, which falls back to the caller's default class."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        use_attribute_docstrings=True,
    )

    ttft_ms: float | None = Field(None, gt=0)
    """Time to first token allowed after arrival, ms."""
    tpot_ms: float | None = Field(None, gt=0)
    """Mean time per output token allowed after the first, ms."""
    deadline_ms: float | None = Field(None, gt=0)
    """Whole-request latency allowed after arrival, ms."""

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if self.ttft_ms is None and self.tpot_ms is None and self.deadline_ms is None:
            raise PydanticCustomError(
                "slo_empty", "must set at least one of ttft_ms, tpot_ms, deadline_ms"
            )
        return self


class StreamOptions(BaseModel):
    """OpenAI `stream_options`."""

    model_config = _STRICT

    include_usage: bool = False
    """Send a final chunk with empty choices and the request's token usage."""


class _Common(BaseModel):
    """Fields shared by completions and chat completions."""

    model_config = _STRICT

    model: str = Field(min_length=1)
    """Served model name."""
    temperature: float | None = Field(None, ge=0, le=2)
    """Sampling temperature (0: greedy); None: the engine's default."""
    top_p: float | None = Field(None, gt=0, le=1)
    """Nucleus sampling mass; None: the engine's default."""
    n: int = Field(1, json_schema_extra={"const": 1})
    """Choices per request; only 1 is supported."""
    stream: bool = False
    """Stream the output as server-sent events."""
    stream_options: StreamOptions | None = None
    """Streaming options; only allowed with stream=true."""
    stop: Annotated[list[str] | None, _STOP_JSON] = Field(None, max_length=4)
    """Up to 4 stop sequences (a single string is accepted)."""
    user: str | None = None
    """End-user id, for logs and abuse tracking."""
    priority: int = 0
    """Criticality in the gateway convention: higher is more critical, 0 standard, negative
    sheddable (shed first under load); `x-gateway-inference-objective` overrides it (range
    checked at admission; the replica's vLLM priority is derived: core/tenancy.py)."""
    ignore_eos: bool = False
    """vLLM extension: keep generating past end-of-sequence until max_tokens (the output length
    is forced to max_tokens; benchmarks use it to replay exact lengths)."""
    slo: str | SLOObject | None = None
    """slomesh extension: a class name or explicit objectives {ttft_ms, tpot_ms, deadline_ms}."""

    @field_validator("n")
    @classmethod
    def _one_choice(cls, value: int) -> int:
        if value != 1:
            raise PydanticCustomError(
                "n_unsupported", "only n=1 is supported, got {n}", {"n": value}
            )
        return value

    @field_validator("stream_options")
    @classmethod
    def _options_need_stream(
        cls, value: StreamOptions | None, info: ValidationInfo
    ) -> StreamOptions | None:
        if value is not None and info.data.get("stream") is not True:
            raise PydanticCustomError("stream_options", "only allowed when stream is true")
        return value

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_shape(cls, value: Any) -> Any:
        if value is None or isinstance(value, SLOObject):
            return value
        if isinstance(value, str):
            if not value.strip():
                raise PydanticCustomError("slo_class", "SLO class name must not be empty")
            return value.strip()
        if isinstance(value, dict):
            return SLOObject.model_validate(value)
        raise PydanticCustomError(
            "slo_type",
            "must be an SLO class name or an object {ttft_ms, tpot_ms, deadline_ms}",
        )

    @property
    def include_usage(self) -> bool:
        """Whether a streamed response ends with a usage chunk."""
        return self.stream and self.stream_options is not None and self.stream_options.include_usage


class CompletionRequest(_Common):
    """POST /v1/completions. `prompt` is one string (a list holding one string is accepted)."""

    prompt: Annotated[str, _PROMPT_JSON]
    """The prompt text."""
    max_tokens: int | None = Field(None, gt=0)
    """Most tokens to generate; None: min(remaining context, the configured default)."""

    @field_validator("prompt", mode="before")
    @classmethod
    def _one_prompt(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise PydanticCustomError(
                    "prompt_type", "token-id prompts are not supported; send text"
                )
            if len(value) > 1:
                raise PydanticCustomError("prompt_list", "n>1 prompts not supported")
            if not value:
                raise PydanticCustomError("prompt_list", "must not be an empty list")
            return value[0]
        return value

    @property
    def requested_max_tokens(self) -> int | None:
        """max_tokens as the client sent it (None: not sent)."""
        return self.max_tokens


class ChatMessage(BaseModel):
    """One chat message. `content` is text or a list of {"type": "text", "text": ...} parts,
    stored joined with newlines; an assistant message may carry null content."""

    model_config = ConfigDict(**_STRICT, json_schema_extra=_null_content_for_assistant_only)

    role: Role
    """Author: system, user, assistant or tool."""
    content: Annotated[str, _CONTENT_JSON]
    """The message text (parts joined with newlines)."""
    name: str | None = None
    """Optional author name."""

    @field_validator("content", mode="before")
    @classmethod
    def _text_content(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None and info.data.get("role") == "assistant":
            return ""
        if not isinstance(value, list):
            return value
        texts: list[str] = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise PydanticCustomError(
                    "content_part",
                    "part {i}: only type 'text' is supported, got {kind}",
                    {"i": i, "kind": repr(kind)},
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise PydanticCustomError(
                    "content_part", "part {i}: 'text' must be a string", {"i": i}
                )
            texts.append(text)
        return "\n".join(texts)


class ChatCompletionRequest(_Common):
    """POST /v1/chat/completions."""

    messages: list[ChatMessage] = Field(min_length=1)
    """The conversation so far."""
    max_tokens: int | None = Field(None, gt=0)
    """Most tokens to generate (deprecated by OpenAI in favour of max_completion_tokens)."""
    max_completion_tokens: int | None = Field(None, gt=0)
    """Most tokens to generate; must equal max_tokens when both are sent."""

    @field_validator("max_completion_tokens")
    @classmethod
    def _agree(cls, value: int | None, info: ValidationInfo) -> int | None:
        other = info.data.get("max_tokens")
        if value is not None and other is not None and other != value:
            raise PydanticCustomError(
                "max_tokens_conflict",
                "conflicts with max_tokens ({a} != {b}); send one of them",
                {"a": value, "b": other},
            )
        return value

    @property
    def requested_max_tokens(self) -> int | None:
        """max_completion_tokens, else max_tokens (None: neither sent)."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens
        return self.max_tokens


_M = TypeVar("_M", bound=BaseModel)


def validate_body(data: Any, model: type[_M]) -> _M:
    """Validate an already-decoded body; APIError 400 naming the first bad field."""
    if not isinstance(data, dict):
        raise bad_request(None, f"request body must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise from_validation_error(err) from None


def parse_body(
    raw: bytes | str,
    model: type[_M],
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
) -> _M:
    """Decode a raw JSON body and validate it as `model` (CompletionRequest or
    ChatCompletionRequest). Raises APIError: 413 over max_body_bytes; 400 for nesting over
    max_json_depth, malformed JSON, invalid Unicode (naming the field) or a bad field
    (`json_body` has the rules)."""
    data = decode_json(raw, max_body_bytes=max_body_bytes, max_json_depth=max_json_depth)
    return validate_body(data, model)


def openapi_schemas(ref_prefix: str = "#/components/schemas/") -> dict[str, Any]:
    """JSON schemas of the request bodies (CompletionRequest, ChatCompletionRequest and the
    models they use), keyed by name, their `$ref`s pointing at `ref_prefix` + name: what an
    OpenAPI document's `components.schemas` holds."""
    _, top = models_json_schema(
        [(CompletionRequest, "validation"), (ChatCompletionRequest, "validation")],
        ref_template=ref_prefix + "{model}",
    )
    defs: dict[str, Any] = top.get("$defs", {})
    return defs
