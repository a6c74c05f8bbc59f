"""Shapes and grids of the forward-pass profiler (pure): the Llama configurations it builds, the
catalog GPU it compares against, and where (N, length) it measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Literal

from shared.policy.registry import UnknownNameError
from shared.profiles.catalog import gpu_names, gpu_spec, model_spec

Dtype = Literal["bf16", "fp32"]
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp32": 4}
DEFAULT_GPU = "H200-141GB"


@dataclass(frozen=True, slots=True)
class ForwardShape:
    """A Llama configuration to build with random weights.

    model: the model name written into the profile. catalog_model: the shared.profiles catalog
    entry with this shape (its roofline is `default_profile`), None for shapes outside it.
    """

    name: str
    model: str
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    max_position_embeddings: int
    rope_scaling: Mapping[str, Any] | None = None
    tie_word_embeddings: bool = False
    catalog_model: str | None = None

    def param_count(self) -> int:
        """Parameters of the built model (embeddings, LM head and RMSNorm weights included)."""
        h = self.hidden_size
        attn = h * self.heads * self.head_dim * 2 + h * self.kv_heads * self.head_dim * 2
        layer = attn + 3 * h * self.intermediate_size + 2 * h
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.layers * layer + embeddings + h

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Δ = 2 (K and V) · layers · kv_heads · head_dim · dtype_bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


_LLAMA_31_8B_SPEC = model_spec("llama-3.1-8b")

LLAMA_31_8B = ForwardShape(
    # Layers, hidden size, heads, KV heads and head_dim from the catalog's llama-3.1-8b (the
    # shape its roofline profile uses); intermediate size, vocab and RoPE from
    # meta-llama/Llama-3.1-8B config.json, which the catalog does not hold.
    name="llama-3.1-8b",
    model=_LLAMA_31_8B_SPEC.name,
    vocab_size=128256,
    hidden_size=_LLAMA_31_8B_SPEC.hidden_size,
    layers=_LLAMA_31_8B_SPEC.layers,
    heads=_LLAMA_31_8B_SPEC.attention_heads,
    kv_heads=_LLAMA_31_8B_SPEC.kv_heads,
    head_dim=_LLAMA_31_8B_SPEC.head_dim,
    intermediate_size=14336,
    rope_theta=500000.0,
    max_position_embeddings=131072,
    rope_scaling={
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    catalog_model=_LLAMA_31_8B_SPEC.name,
)

TINY = ForwardShape(
    # The shape of the CPU replicas' tiny model (services/replica/vllm/tiny_model.py).
    name="tiny",
    model="tiny-llama",
    vocab_size=2048,
    hidden_size=64,
    layers=2,
    heads=4,
    kv_heads=2,
    head_dim=32,
    intermediate_size=256,
    rope_theta=10000.0,
    max_position_embeddings=2048,
)

SHAPES: dict[str, ForwardShape] = {s.name: s for s in (LLAMA_31_8B, TINY)}


def shape_named(name: str) -> ForwardShape:
    """The shape called `name`; UnknownNameError (listing the valid names) otherwise."""
    if name not in SHAPES:
        raise UnknownNameError("shape", name, list(SHAPES))
    return SHAPES[name]


def resolve_gpu(name: str) -> str:
    """A catalog GPU name from `name`: exact, else a unique case-insensitive prefix ("H200")."""
    names = gpu_names()
    if name in names:
        return name
    hits = [g for g in names if g.lower().startswith(name.lower())]
    if len(hits) == 1:
        return hits[0]
    return gpu_spec(name).name  # raises UnknownNameError listing the valid names


@dataclass(frozen=True, slots=True)
class Grid:
    """Where to measure: prefill (N, L) and decode (N, context) points, warm-up and repeats.

    max_prefill_tokens caps the tokens of one forward when a decode cache is filled (the
    prompt is prefilled in chunks of max_prefill_tokens // N tokens).
    """

    prefill: tuple[tuple[int, int], ...]
    decode: tuple[tuple[int, int], ...]
    warmup: int = 2
    repeats: int = 5
    max_prefill_tokens: int = 16384

    def __post_init__(self) -> None:
        for kind, points in (("prefill", self.prefill), ("decode", self.decode)):
            for n, x in points:
                if n < 1 or x < 1:
                    raise ValueError(f"grid.{kind} point ({n}, {x}): N and length must be >= 1")
        if self.warmup < 0 or self.repeats < 1:
            raise ValueError("grid.warmup must be >= 0 and grid.repeats >= 1")
        if self.max_prefill_tokens < 1:
            raise ValueError("grid.max_prefill_tokens must be >= 1")


def grid_points(ns: Sequence[int], xs: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Every (N, x) pair of the two axes (N and x vary independently, as the fit needs)."""
    return tuple(product(ns, xs))


_GRIDS: dict[tuple[str, bool], Grid] = {
    ("llama-3.1-8b", True): Grid(
        prefill=grid_points((1, 4), (128, 512, 2048)),
        decode=grid_points((1, 8, 32), (256, 2048)),
        warmup=2,
        repeats=5,
    ),
    ("llama-3.1-8b", False): Grid(
        prefill=grid_points((1, 2, 4, 8), (128, 256, 512, 1024, 2048)),
        decode=grid_points((1, 4, 16, 64), (256, 1024, 4096)),
        warmup=3,
        repeats=7,
    ),
    ("tiny", True): Grid(
        prefill=grid_points((1, 4), (16, 64, 256)),
        decode=grid_points((1, 4, 16), (64, 512)),
        warmup=2,
        repeats=5,
    ),
    ("tiny", False): Grid(
        prefill=grid_points((1, 2, 4, 8), (16, 32, 64, 128, 256)),
        decode=grid_points((1, 4, 16), (64, 256, 1024)),
        warmup=3,
        repeats=7,
    ),
}


def default_grid(shape: str, quick: bool) -> Grid:
    """The built-in grid of a shape (quick: fewer points and repeats)."""
    return _GRIDS[(shape_named(shape).name, quick)]
