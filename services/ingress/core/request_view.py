"""What admission reads of an OpenAI request, and the body the ingress forwards to vLLM.

The ingress does not own an OpenAI schema: vLLM's own serving code on the replica validates and
answers every request (services/replica/vllm/openai_app.py), so a request is answered exactly as
`vllm serve` answers it, errors included. Admission reads only what it needs, leniently: the
model, `stream`, the output budget (`max_tokens`, or `max_completion_tokens` on chat, or
`max_output_tokens` on responses), `n`, the body's `priority` (vLLM's meaning: lower first, a
tie-break inside slomesh's order), vLLM's `ignore_eos`, and slomesh's extension `slo`. A field
of the wrong type reads as absent here; vLLM then answers the 400 it gives for it.

On the way to the replica the ingress removes `slo` (slomesh's, not vLLM's) and any
client-sent slomesh metadata in `vllm_xargs` (`forward_body`); otherwise the body goes byte
for byte. The replica gives vLLM slomesh's metadata itself, so no client can set a deadline or
an engine priority of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from services.ingress.core.errors import bad_request
from services.ingress.core.openai_schema import SLOObject
from shared.domain.engine_metadata import EXTRA_ARGS_KEY

GENERATION_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
"""Routes that generate: admitted and placed like any request."""
RENDER_ROUTES = ("/tokenize", "/detokenize")
"""Routes vLLM answers from the tokenizer alone (placed, never run on the engine)."""

_BUDGET_FIELDS = {
    "/v1/chat/completions": ("max_completion_tokens", "max_tokens"),
    "/v1/completions": ("max_tokens",),
    "/v1/responses": ("max_output_tokens",),
}


@dataclass(frozen=True)
class RequestView:
    """An OpenAI request as admission reads it (module docstring)."""

    route: str
    body: dict[str, Any]
    """The client's JSON object (slomesh's extension still in it)."""
    model: str
    stream: bool = False
    max_tokens: int | None = None
    """The output budget the client asked for per choice; None: vLLM's default (the context
    left after the prompt)."""
    n: int = 1
    """Choices asked for (engine sequences: admission counts n x the budget)."""
    priority: int = 0
    ignore_eos: bool = False
    slo: Any = None
    """slomesh's `slo` extension as sent (a class name or {ttft_ms, tpot_ms, deadline_ms})."""

    @property
    def generates(self) -> bool:
        return self.route in GENERATION_ROUTES


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_view(route: str, data: Any, default_model: str) -> RequestView:
    """The view of a parsed JSON body on `route` (`data` need not be an object: vLLM answers
    what is wrong with it). A missing model is the mesh's first (as vLLM serves its first)."""
    body = data if isinstance(data, dict) else {}
    model = body.get("model")
    budget = None
    for name in _BUDGET_FIELDS.get(route, ()):
        budget = _int(body.get(name))
        if budget is not None:
            break
    n = _int(body.get("n"))
    if route in RENDER_ROUTES:
        budget = 1  # answered from the tokenizer: nothing to plan for
    return RequestView(
        route=route,
        body=body,
        model=model if isinstance(model, str) else default_model,
        stream=body.get("stream") is True,
        max_tokens=budget,
        n=n if n is not None and n >= 1 else 1,
        priority=_int(body.get("priority")) or 0,
        ignore_eos=body.get("ignore_eos") is True,
        slo=body.get("slo"),
    )


def forward_body(view: RequestView, raw: bytes) -> bytes:
    """The body vLLM gets: the client's, byte for byte, unless it carries slomesh's `slo` or
    client-sent slomesh metadata in `vllm_xargs`, which are removed (no client sets its own
    deadline or engine priority; the replica adds slomesh's metadata itself)."""
    body = view.body
    xargs = body.get("vllm_xargs")
    spoofed = isinstance(xargs, dict) and EXTRA_ARGS_KEY in xargs
    if "slo" not in body and not spoofed:
        return raw
    cleaned = {k: v for k, v in body.items() if k != "slo"}
    if isinstance(xargs, dict) and spoofed:
        cleaned["vllm_xargs"] = {k: v for k, v in xargs.items() if k != EXTRA_ARGS_KEY}
    return json.dumps(cleaned, ensure_ascii=False).encode()


def prompt_text(view: RequestView, tokenizer: Any | None) -> tuple[str, list[int] | None]:
    """The prompt as the engine will see it (the chat template rendered as vLLM renders it,
    without a second BOS) and its token ids (None without a tokenizer), for admission's token
    count, prefix hashes and the length predictor. What cannot be rendered here is counted from
    its JSON text (vLLM renders it exactly on the replica)."""
    body = view.body
    chat = view.route in ("/v1/chat/completions", "/tokenize")
    if chat and isinstance(body.get("messages"), list):
        text = _render_chat(body, tokenizer)
        if text is not None and tokenizer is not None:
            return text, _ids(tokenizer, text, False)
        return text if text is not None else _json_text(body.get("messages")), None
    source = body.get("input") if view.route == "/v1/responses" else body.get("prompt")
    if isinstance(source, str):
        ids = _ids(tokenizer, source, True) if tokenizer is not None else None
        return source, ids
    if isinstance(source, list) and source and all(_int(t) is not None for t in source):
        return "", [int(t) for t in source]  # a prompt of token ids
    if isinstance(source, list) and all(isinstance(p, str) for p in source):
        text = "\n".join(source)  # several prompts: one choice set each
        return text, None
    return _json_text(source if source is not None else body), None


def _ids(tokenizer: Any, text: str, special_tokens: bool) -> list[int]:
    """`text`'s token ids (the tokenizer's cheap path when it has one: ingress/tokenizers.py)."""
    encode = getattr(tokenizer, "encode_ids", None)
    if encode is not None:
        return list(encode(text, special_tokens))
    return list(tokenizer(text, add_special_tokens=special_tokens)["input_ids"])


def _render_chat(body: dict[str, Any], tokenizer: Any | None) -> str | None:
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not template:
        return None
    kwargs = body.get("chat_template_kwargs")
    try:
        return str(
            tokenizer.apply_chat_template(  # type: ignore[union-attr]
                body["messages"],
                tools=body.get("tools") if isinstance(body.get("tools"), list) else None,
                tokenize=False,
                add_generation_prompt=body.get("add_generation_prompt", True) is not False,
                **(kwargs if isinstance(kwargs, dict) else {}),
            )
        )
    except Exception:  # content parts, odd roles...: vLLM renders them on the replica
        return None


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def parse_slo(value: Any) -> str | SLOObject | None:
    """slomesh's `slo` extension: a class name or {ttft_ms, tpot_ms, deadline_ms}; 400 naming
    the field otherwise."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            raise bad_request("slo", "SLO class name must not be empty")
        return value.strip()
    if isinstance(value, dict):
        try:
            return SLOObject.model_validate(value)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise bad_request(f"slo.{where}" if where else "slo", first["msg"]) from None
    raise bad_request(
        "slo", "must be an SLO class name or an object {ttft_ms, tpot_ms, deadline_ms}"
    )
