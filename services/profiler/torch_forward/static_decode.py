"""Decode steps on a static KV cache, replayed from a CUDA graph where the device allows it
(torch and transformers imported inside the functions).

A serving engine (vLLM) writes KV into preallocated blocks and, on CUDA, replays each decode
batch size from a captured CUDA graph, so a decode step costs its GPU work and not the CPU's
kernel launches. The eager `DynamicCache` path of measure.py pays both the launches (tens of ms
for an 8B model, whatever the batch) and a torch.cat copy of the whole cache every step. This
module times the step the way the engine runs it:

  * a transformers `StaticCache` of exactly context + 1 positions is filled by a chunked prefill
    of N random prompts of `context` tokens;
  * the step writes the token at position `context`: it first sets each layer's write offset
    (transformers' `cumulative_length`, a device tensor) back to `context`, inside the step and
    so inside the graph, so every repeat overwrites the same slot and sees the same context;
  * attention at the step: transformers masks a static cache (its key length is the cache's, not
    the context's), and SDPA with a mask repeats the K/V heads of grouped-query attention and
    leaves the fused kernels, reading the cache several times over. A serving engine's paged
    attention reads each cached K/V once. Since the cache holds exactly context + 1 positions and
    all of them are visible to the new token, the step (and only the step: the fill keeps
    transformers' SDPA and its mask) runs `DECODE_ATTENTION`, registered with transformers'
    attention interfaces, which drops the mask, so SDPA runs its fused kernel with grouped-query
    attention;
  * on CUDA the step is warmed up on a side stream and captured once in a `torch.cuda.CUDAGraph`;
    a timed call is one replay. Where capture fails (a host sync inside the model's forward, an
    unsupported op), the step runs eagerly on the static cache and the mode says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DECODE_MODES = ("cuda-graph", "eager")
"""cuda-graph: static cache, step replayed from a CUDA graph (CUDA only). eager: measure.py's
DynamicCache step, launched op by op."""


DECODE_ATTENTION = "slomesh-static-decode-sdpa"
"""transformers attention implementation of the static step: SDPA without the mask, exact only
where every cached position is visible to the query (a one-token step on a cache filled to its
length)."""

FILL_ATTENTION = "sdpa"
"""transformers attention implementation of the fill (and of the model as measure.py builds it)."""


def _decode_sdpa(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any
) -> Any:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, None, **kwargs)


def _use_attention(model: Any, name: str) -> None:
    """Switch `model` to attention implementation `name` (DECODE_ATTENTION is registered with
    transformers on first use)."""
    if name == DECODE_ATTENTION:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(DECODE_ATTENTION, _decode_sdpa)
        AttentionMaskInterface.register(DECODE_ATTENTION, sdpa_mask)
    model.config._attn_implementation = name


@dataclass(frozen=True, slots=True)
class StaticStep:
    """A prepared decode step: `call` runs one step (eagerly it returns the model's output, a
    replay returns None); `mode` says how it runs ("cuda-graph" or "static-eager: <why capture
    was not used>"); `prompt_ids` (N x context) and `step_ids` (N x 1) are the tokens it holds."""

    call: Callable[[], object]
    mode: str
    prompt_ids: Any
    step_ids: Any


def prepare_static_step(
    model: Any,
    *,
    n: int,
    context: int,
    vocab_size: int,
    max_prefill_tokens: int,
    keep_kw: str,
    capture: bool,
    capture_warmup: int = 3,
) -> StaticStep:
    """Fill a static cache with N prompts of `context` tokens and return its decode step.

    capture: try to capture the step in a CUDA graph (the model must be on a CUDA device).
    """
    import torch
    from transformers import StaticCache

    if n < 1 or context < 1:
        raise ValueError(f"decode point (N={n}, context={context}): both must be >= 1")
    dev = next(model.parameters()).device
    _use_attention(model, FILL_ATTENTION)
    cache = StaticCache(config=model.config, max_cache_len=context + 1)
    chunk = max(1, max_prefill_tokens // n)
    prompt_ids = torch.randint(0, vocab_size, (n, context), device=dev)
    for start in range(0, context, chunk):
        length = min(chunk, context - start)
        ids = prompt_ids[:, start : start + length]
        positions = torch.arange(start, start + length, device=dev)
        model(
            input_ids=ids,
            past_key_values=cache,
            cache_position=positions,
            use_cache=True,
            **{keep_kw: 1},
        )
    step_ids = torch.randint(0, vocab_size, (n, 1), device=dev)
    step_position = torch.tensor([context], device=dev)
    _use_attention(model, DECODE_ATTENTION)  # from here on the model runs only this step
    layers: list[Any] = list(cache.layers)
    offsets: list[Any] = [
        layer.cumulative_length
        for layer in layers
        if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor)
    ]

    def eager() -> object:
        for offset in offsets:
            offset.fill_(context)
        return model(
            input_ids=step_ids,
            past_key_values=cache,
            cache_position=step_position,
            use_cache=True,
            **{keep_kw: 1},
        )

    if not capture:
        return StaticStep(eager, "static-eager: capture not requested", prompt_ids, step_ids)
    if dev.type != "cuda":
        return StaticStep(
            eager, f"static-eager: no CUDA graphs on {dev.type}", prompt_ids, step_ids
        )
    try:
        side = torch.cuda.Stream(device=dev)  # type: ignore[no-untyped-call]
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(capture_warmup):
                eager()
        torch.cuda.current_stream(dev).wait_stream(side)
        torch.cuda.synchronize(dev)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            eager()
    except Exception as err:  # any capture failure falls back to eager, and says why
        torch.cuda.synchronize(dev)
        reason = f"{type(err).__name__}: {err}".splitlines()[0][:160]
        return StaticStep(eager, f"static-eager: capture failed ({reason})", prompt_ids, step_ids)

    def replay() -> object:
        graph.replay()
        return None

    return StaticStep(replay, "cuda-graph", prompt_ids, step_ids)
