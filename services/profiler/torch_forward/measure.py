"""Measurements of the forward-pass profiler (torch and transformers imported inside the
functions that need them).

What is measured (`measure`):
  * the model: a `LlamaForCausalLM` built from a `LlamaConfig` with random weights (nothing is
    downloaded), SDPA attention, on the requested device and dtype. Its build time (random init
    on the device) stands in for the cold-load time.
  * prefill: one forward of N random prompts of L tokens each (a fresh KV cache is written, only
    the last position's logits are computed, as a serving engine does), per (N, L) grid point.
  * decode (`decode_mode` "eager"): a `DynamicCache` is filled by a (chunked) prefill of N
    prompts of `context` tokens, then single-token forwards of N sequences are timed; after each
    timed step the cache is cropped back by one token so every repeat sees the same context.
    `decode_mode` "cuda-graph": the step runs on a static cache, replayed from a CUDA graph as a
    serving engine runs it (static_decode.py).
  * every timing is wall clock around the call with torch.cuda.synchronize() before and after
    (CUDA), after `warmup` untimed calls; the median of `repeats` timed calls is kept.
  * swap: a pinned host -> device copy (CUDA) or a host memory copy (CPU).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.profiler.torch_forward.shapes import DTYPE_BYTES, ForwardShape, Grid
from services.profiler.torch_forward.static_decode import DECODE_MODES, prepare_static_step
from services.profiler.torch_forward.timing import measure_copy_bytes_s, median_time
from shared.profiles.fit import DecodeSample, PrefillSample

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """Sizes of the built model. streamed_bytes: weight bytes one step reads from memory (all
    weights except the input-embedding table, of which a step gathers only N rows)."""

    params: int
    weight_bytes: int
    embedding_params: int
    lm_head_params: int
    layer_params: int
    streamed_bytes: int
    dtype_bytes: int
    kv_bytes_per_token: int


@dataclass(frozen=True, slots=True)
class Measurement:
    """Everything `measure` timed, in seconds and bytes (medians over the grid's repeats)."""

    shape: ForwardShape
    device: str
    device_name: str
    dtype: str
    facts: ModelFacts
    prefill: tuple[PrefillSample, ...]
    decode: tuple[DecodeSample, ...]
    build_s: float
    swap_bytes_s: float
    device_memory_bytes: int | None
    grid: Grid
    versions: Mapping[str, str] = field(default_factory=dict)
    decode_mode: str = "eager"
    """How the decode steps ran: "eager", "cuda-graph", or "static-eager: <why>" (every mode seen
    over the grid, joined by "; ")."""


def llama_config(shape: ForwardShape) -> Any:
    """A transformers LlamaConfig of `shape` (no download)."""
    from transformers import LlamaConfig

    kwargs: dict[str, Any] = {
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "max_position_embeddings": shape.max_position_embeddings,
        "rope_theta": shape.rope_theta,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if shape.rope_scaling is not None:
        kwargs["rope_scaling"] = dict(shape.rope_scaling)
    return LlamaConfig(**kwargs)


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype == "bf16":
        return torch.bfloat16
    if dtype == "fp32":
        return torch.float32
    raise ValueError(f"dtype must be bf16 or fp32, got {dtype!r}")


def _model_facts(model: Any, shape: ForwardShape, dtype_bytes: int) -> ModelFacts:
    params = 0
    weight_bytes = 0
    for p in model.parameters():  # shared (tied) parameters are listed once
        params += int(p.numel())
        weight_bytes += int(p.numel()) * int(p.element_size())
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = emb is head
    emb_params = int(emb.numel())
    head_params = int(head.numel())
    layer_params = params - emb_params - (0 if tied else head_params)
    emb_bytes = emb_params * int(emb.element_size())
    return ModelFacts(
        params=params,
        weight_bytes=weight_bytes,
        embedding_params=emb_params,
        lm_head_params=head_params,
        layer_params=layer_params,
        streamed_bytes=weight_bytes - (0 if tied else emb_bytes),
        dtype_bytes=dtype_bytes,
        kv_bytes_per_token=shape.kv_bytes_per_token(dtype_bytes),
    )


def measure(
    shape: ForwardShape,
    *,
    device: str,
    dtype: str,
    grid: Grid,
    seed: int = 0,
    swap_probe_bytes: int = 256 * 2**20,
    threads: int | None = None,
    decode_mode: str = "eager",
    progress: Progress | None = None,
) -> Measurement:
    """Build `shape` with random weights on `device` and time its prefill and decode steps.

    threads: torch's intra-op CPU threads during the run (restored afterwards); None keeps
    torch's default. On a shared or loaded CPU, 1 avoids OpenMP oversubscription stalls.
    decode_mode: "eager" (DynamicCache, op by op) or "cuda-graph" (static cache, one graph replay
    per step; falls back to the static cache run eagerly where capture is impossible).
    """
    if decode_mode not in DECODE_MODES:
        modes = ", ".join(DECODE_MODES)
        raise ValueError(f"decode_mode must be one of {modes}, got {decode_mode!r}")
    import torch

    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _measure(
            shape,
            device=device,
            dtype=dtype,
            grid=grid,
            seed=seed,
            swap_probe_bytes=swap_probe_bytes,
            decode_mode=decode_mode,
            progress=progress,
        )
    finally:
        torch.set_num_threads(old_threads)


def _measure(
    shape: ForwardShape,
    *,
    device: str,
    dtype: str,
    grid: Grid,
    seed: int = 0,
    swap_probe_bytes: int = 256 * 2**20,
    decode_mode: str = "eager",
    progress: Progress | None = None,
) -> Measurement:
    """Build `shape` with random weights on `device` and time its prefill and decode steps."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    say = progress if progress is not None else (lambda _msg: None)
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device (torch.cuda.is_available())")
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"device must be cuda or cpu, got {device!r}")
    torch_dtype = _torch_dtype(dtype)
    dtype_bytes = DTYPE_BYTES[dtype]

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    torch.manual_seed(seed)
    config = llama_config(shape)
    say(f"building {shape.name} ({shape.param_count() / 1e9:.3g} B params) on {device}, {dtype}")
    sync()
    t0 = time.perf_counter()
    with dev:
        model = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]
            config, dtype=torch_dtype, attn_implementation="sdpa"
        )
    model = model.to(device=dev, dtype=torch_dtype).eval()
    sync()
    build_s = time.perf_counter() - t0
    facts = _model_facts(model, shape, dtype_bytes)
    forward_params = inspect.signature(model.forward).parameters
    keep_kw = "logits_to_keep" if "logits_to_keep" in forward_params else "num_logits_to_keep"

    def forward(ids: Any, cache: Any = None) -> Any:
        return model(input_ids=ids, past_key_values=cache, use_cache=True, **{keep_kw: 1})

    def random_ids(n: int, length: int) -> Any:
        return torch.randint(0, shape.vocab_size, (n, length), device=dev)

    prefill: list[PrefillSample] = []
    decode: list[DecodeSample] = []
    with torch.inference_mode():
        for n, length in grid.prefill:
            ids = random_ids(n, length)

            def prefill_step(ids: Any = ids) -> object:
                return forward(ids)

            t = median_time(prefill_step, sync, grid.warmup, grid.repeats)
            prefill.append(PrefillSample(n=n, length=length, time_s=t))
            say(f"prefill N={n} L={length}: {t * 1e3:.2f} ms")
            del ids, prefill_step
        modes: list[str] = []
        for n, context in grid.decode:
            if decode_mode == "cuda-graph":
                prepared = prepare_static_step(
                    model,
                    n=n,
                    context=context,
                    vocab_size=shape.vocab_size,
                    max_prefill_tokens=grid.max_prefill_tokens,
                    keep_kw=keep_kw,
                    capture=True,
                )
                t = median_time(prepared.call, sync, grid.warmup, grid.repeats)
                mode = prepared.mode
                del prepared
            else:
                t = _eager_decode_time(forward, random_ids, sync, grid, n, context)
                mode = "eager"
            if mode not in modes:
                modes.append(mode)
            decode.append(DecodeSample(n=n, context=float(context), time_s=t))
            say(f"decode N={n} context={context} ({mode}): {t * 1e3:.2f} ms")
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    swap_bytes_s = measure_copy_bytes_s(device, swap_probe_bytes)
    copy_kind = "pinned host->device" if dev.type == "cuda" else "host"
    say(f"{copy_kind} copy: {swap_bytes_s / 1e9:.1f} GB/s")

    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        device_name = str(props.name)
        device_memory: int | None = int(props.total_memory)
    else:
        threads = torch.get_num_threads()
        device_name = f"CPU, {threads} torch thread{'' if threads == 1 else 's'}"
        device_memory = None
    return Measurement(
        shape=shape,
        device=dev.type,
        device_name=device_name,
        dtype=dtype,
        facts=facts,
        prefill=tuple(prefill),
        decode=tuple(decode),
        build_s=build_s,
        swap_bytes_s=swap_bytes_s,
        device_memory_bytes=device_memory,
        grid=grid,
        versions={"torch": str(torch.__version__), "transformers": transformers.__version__},
        decode_mode="; ".join(modes),
    )


def _eager_decode_time(
    forward: Callable[..., Any],
    random_ids: Callable[[int, int], Any],
    sync: Callable[[], None],
    grid: Grid,
    n: int,
    context: int,
) -> float:
    """Median step time on a DynamicCache filled with N prompts of `context` tokens."""
    chunk = max(1, grid.max_prefill_tokens // n)
    cache = None
    for start in range(0, context, chunk):
        out = forward(random_ids(n, min(chunk, context - start)), cache)
        cache = out.past_key_values
        del out
    step_ids = random_ids(n, 1)

    def step() -> object:
        return forward(step_ids, cache)

    def crop() -> None:
        assert cache is not None
        cache.crop(-1)  # drop the token the step appended: same context every repeat

    return median_time(step, sync, grid.warmup, grid.repeats, reset=crop)
