"""Forward-pass profiler: time a random-weight Llama in PyTorch + transformers and compare the
fitted step-time profile with the roofline one (ALGORITHMS.md §1).

Shell module: torch and transformers are imported inside the functions that need them, so the
pure parts (shapes, grids, FLOP/byte accounting, profiles, the report) import without them.

What is measured (`measure`):
  * the model: a `LlamaForCausalLM` built from a `LlamaConfig` with random weights (nothing is
    downloaded), SDPA attention, on the requested device and dtype. Its build time (random init
    on the device) stands in for the cold-load time.
  * prefill: one forward of N random prompts of L tokens each (a fresh KV cache is written, only
    the last position's logits are computed, as a serving engine does), per (N, L) grid point.
  * decode: a `DynamicCache` is filled by a (chunked) prefill of N prompts of `context` tokens,
    then single-token forwards of N sequences are timed; after each timed step the cache is
    cropped back by one token so every repeat sees the same context.
  * every timing is wall clock around the call with torch.cuda.synchronize() before and after
    (CUDA), after `warmup` untimed calls; the median of `repeats` timed calls is kept.
  * swap: a pinned host -> device copy (CUDA) or a host memory copy (CPU).

The samples are fitted with shared.profiles.fit (non-negative, relative-error least squares) to
T_prefill(N, L) = p1·N·L + p2·N + p3·L + p4 and tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4, and
the result is compared point by point with `derive_profile` / `default_profile` for the same GPU
and model, together with the efficiency the run implies: achieved FLOP/s in prefill against the
GPU's dense BF16 peak, achieved bytes/s in decode against its HBM bandwidth.

Known differences from a serving engine, all of which make the measured steps slower than a vLLM
step: eager PyTorch (no CUDA graphs, so kernel launches are paid on the CPU every step), HF's
`DynamicCache` appends with torch.cat (each decode step copies the whole KV cache once more), and
prompts are padded-free but not packed across requests (N x L, not a varlen batch).
"""

from __future__ import annotations

import inspect
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Literal

from services.profiler.core.store import CPU_DEVICE
from shared.domain.hardware import GPUSpec, ModelSpec
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.policy.registry import UnknownNameError
from shared.profiles.catalog import gpu_names, gpu_spec
from shared.profiles.defaults import default_profile
from shared.profiles.fit import DecodeSample, FitResult, PrefillSample, fit_decode, fit_prefill
from shared.profiles.roofline import RooflineParams, derive_profile
from shared.report.table import markdown_table

Dtype = Literal["bf16", "fp32"]
DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp32": 4}
DEFAULT_GPU = "H200-141GB"
CPU_KV_CAPACITY_BYTES = 2**30
"""KV capacity recorded in a CPU profile unless one is given (1 GiB; nothing sizes it)."""

Progress = Callable[[str], None]


# --------------------------------------------------------------------------------------------
# Shapes and grids (pure)
# --------------------------------------------------------------------------------------------


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


LLAMA_31_8B = ForwardShape(
    # meta-llama/Llama-3.1-8B config.json (the catalog's llama-3.1-8b has the same layers, hidden
    # size, heads, KV heads and head_dim; intermediate size, vocab and RoPE are from config.json).
    name="llama-3.1-8b",
    model="llama-3.1-8b",
    vocab_size=128256,
    hidden_size=4096,
    layers=32,
    heads=32,
    kv_heads=8,
    head_dim=128,
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
    catalog_model="llama-3.1-8b",
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


# --------------------------------------------------------------------------------------------
# Measurements (torch)
# --------------------------------------------------------------------------------------------


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


def _median_time(
    call: Callable[[], object],
    sync: Callable[[], None],
    warmup: int,
    repeats: int,
    reset: Callable[[], None] | None = None,
) -> float:
    """Median wall time of `call` (synchronised before and after); `reset` runs untimed after
    every call, warm-up included."""
    for _ in range(warmup):
        call()
        if reset is not None:
            reset()
    times: list[float] = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
        if reset is not None:
            reset()
    return statistics.median(times)


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


def measure_copy_bytes_s(device: str, nbytes: int, repeats: int = 5) -> float:
    """Bytes/s of a pinned host -> device copy (CUDA) or a host memory copy (CPU)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        src = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
        dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)

        def sync() -> None:
            torch.cuda.synchronize(dev)

        def copy() -> object:
            return dst.copy_(src, non_blocking=True)
    else:
        src = torch.zeros(nbytes, dtype=torch.uint8)
        dst = torch.zeros(nbytes, dtype=torch.uint8)

        def sync() -> None:
            return None

        def copy() -> object:
            return dst.copy_(src)

    return nbytes / _median_time(copy, sync, warmup=1, repeats=repeats)


def measure(
    shape: ForwardShape,
    *,
    device: str,
    dtype: str,
    grid: Grid,
    seed: int = 0,
    swap_probe_bytes: int = 256 * 2**20,
    threads: int | None = None,
    progress: Progress | None = None,
) -> Measurement:
    """Build `shape` with random weights on `device` and time its prefill and decode steps.

    threads: torch's intra-op CPU threads during the run (restored afterwards); None keeps
    torch's default. On a shared or loaded CPU, 1 avoids OpenMP oversubscription stalls.
    """
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

            t = _median_time(prefill_step, sync, grid.warmup, grid.repeats)
            prefill.append(PrefillSample(n=n, length=length, time_s=t))
            say(f"prefill N={n} L={length}: {t * 1e3:.2f} ms")
            del ids, prefill_step
        for n, context in grid.decode:
            chunk = max(1, grid.max_prefill_tokens // n)
            cache = None
            for start in range(0, context, chunk):
                out = forward(random_ids(n, min(chunk, context - start)), cache)
                cache = out.past_key_values
                del out
            step_ids = random_ids(n, 1)

            def step(cache: Any = cache, step_ids: Any = step_ids) -> object:
                return forward(step_ids, cache)

            def crop(cache: Any = cache) -> None:
                cache.crop(-1)  # drop the token the step appended: same context every repeat

            t = _median_time(step, sync, grid.warmup, grid.repeats, reset=crop)
            decode.append(DecodeSample(n=n, context=float(context), time_s=t))
            say(f"decode N={n} context={context}: {t * 1e3:.2f} ms")
            del cache, step, crop, step_ids
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
    )


# --------------------------------------------------------------------------------------------
# Profiles and comparison (pure)
# --------------------------------------------------------------------------------------------


def prefill_flops(shape: ForwardShape, facts: ModelFacts, n: int, length: int) -> float:
    """Useful FLOPs of a prefill of N prompts of L tokens: 2 per layer weight per token, the LM
    head for one position per prompt, and causal attention 2·layers·heads·head_dim·L² per prompt
    (QKᵀ and AV over L/2 earlier tokens on average, 2 FLOPs per multiply-add)."""
    matmul = 2.0 * facts.layer_params * n * length + 2.0 * facts.lm_head_params * n
    attention = 2.0 * shape.layers * shape.heads * shape.head_dim * n * length * length
    return matmul + attention


def decode_bytes(facts: ModelFacts, n: int, context: float) -> float:
    """Bytes one decode step must read: the streamed weights once plus N·context tokens of KV."""
    return facts.streamed_bytes + n * context * facts.kv_bytes_per_token


def default_kv_capacity_bytes(m: Measurement, params: RooflineParams | None = None) -> int:
    """ζ·device memory − weights − engine overhead on CUDA (the roofline's rule with the measured
    memory); CPU_KV_CAPACITY_BYTES on CPU."""
    if m.device_memory_bytes is None:
        return CPU_KV_CAPACITY_BYTES
    p = params if params is not None else RooflineParams()
    usable = p.gpu_memory_utilization * m.device_memory_bytes
    return math.floor(usable - m.facts.weight_bytes - p.engine_overhead_bytes)


def source_label(m: Measurement) -> str:
    """The fitted profile's `source`."""
    return (
        f"fitted:torch-forward(shape={m.shape.name},device={m.device}:{m.device_name},"
        f"dtype={m.dtype},transformers={m.versions.get('transformers', '?')},"
        f"{len(m.prefill)} prefill + {len(m.decode)} decode samples)"
    )


@dataclass(frozen=True, slots=True)
class FittedProfile:
    profile: HardwareProfile
    prefill_fit: FitResult[PrefillCoeffs]
    decode_fit: FitResult[DecodeCoeffs]


def fitted_profile(m: Measurement, gpu: str, kv_capacity_bytes: int | None = None) -> FittedProfile:
    """The measured profile: fitted coefficients, the model's sizes, measured copy and build rates.

    Its gpu is the catalog name `gpu` for a CUDA run and "cpu" for a CPU run (so a CPU profile is
    never mistaken for a GPU one).
    """
    pf = fit_prefill(m.prefill)
    df = fit_decode(m.decode)
    kv = kv_capacity_bytes if kv_capacity_bytes is not None else default_kv_capacity_bytes(m)
    if kv <= 0:
        raise ValueError(f"kv capacity must be > 0 bytes, got {kv}")
    profile = HardwareProfile(
        gpu=resolve_gpu(gpu) if m.device == "cuda" else CPU_DEVICE,
        model=m.shape.model,
        tensor_parallel=1,
        prefill=pf.coeffs,
        decode=df.coeffs,
        kv_capacity_bytes=kv,
        kv_bytes_per_token=m.facts.kv_bytes_per_token,
        weight_bytes=m.facts.weight_bytes,
        swap_bytes_s=m.swap_bytes_s,
        cold_load_bytes_s=m.facts.weight_bytes / m.build_s,
        inefficiency=1.0,
        source=source_label(m),
    )
    return FittedProfile(profile=profile, prefill_fit=pf, decode_fit=df)


def roofline_profile(
    m: Measurement, gpu: str, params: RooflineParams | None = None
) -> HardwareProfile:
    """The roofline profile of the measured model on one `gpu` (tensor_parallel 1).

    A catalogued shape in bf16 gets `default_profile`; anything else gets `derive_profile` of a
    ModelSpec built from the measured model (its parameter count and dtype).
    """
    name = resolve_gpu(gpu)
    if m.shape.catalog_model is not None and m.facts.dtype_bytes == 2:
        return default_profile(name, m.shape.catalog_model, 1, params=params)
    spec = ModelSpec(
        name=m.shape.model,
        params=m.facts.params,
        layers=m.shape.layers,
        hidden_size=m.shape.hidden_size,
        attention_heads=m.shape.heads,
        kv_heads=m.shape.kv_heads,
        head_dim=m.shape.head_dim,
        dtype_bytes=m.facts.dtype_bytes,
    )
    return derive_profile(gpu_spec(name), spec, 1, params)


@dataclass(frozen=True, slots=True)
class PointComparison:
    """One grid point: measured, fitted and roofline step time, and the work it did.

    work is FLOPs for prefill and bytes read for decode; achieved = work / measured_s.
    """

    phase: str
    n: int
    x: float
    measured_s: float
    fitted_s: float
    roofline_s: float
    work: float

    @property
    def ratio(self) -> float:
        """measured / roofline (> 1: slower than the roofline predicts)."""
        return self.measured_s / self.roofline_s

    @property
    def achieved(self) -> float:
        return self.work / self.measured_s


@dataclass(frozen=True, slots=True)
class Comparison:
    """The fitted and roofline profiles side by side, point by point."""

    measurement: Measurement
    fitted: FittedProfile
    roofline: HardwareProfile
    gpu: GPUSpec
    roofline_params: RooflineParams
    points: tuple[PointComparison, ...]

    def phase(self, name: str) -> list[PointComparison]:
        return [p for p in self.points if p.phase == name]

    @property
    def prefill_efficiency(self) -> float:
        """Best achieved prefill FLOP/s as a fraction of the GPU's dense BF16 peak."""
        return max(p.achieved for p in self.phase("prefill")) / self.gpu.peak_flops

    @property
    def decode_efficiency(self) -> float:
        """Best achieved decode bytes/s as a fraction of the GPU's HBM bandwidth."""
        return max(p.achieved for p in self.phase("decode")) / self.gpu.hbm_bytes_s

    @property
    def decode_ratio_median(self) -> float:
        return statistics.median(p.ratio for p in self.phase("decode"))

    @property
    def prefill_ratio_median(self) -> float:
        return statistics.median(p.ratio for p in self.phase("prefill"))


def compare(
    m: Measurement,
    gpu: str = DEFAULT_GPU,
    *,
    kv_capacity_bytes: int | None = None,
    params: RooflineParams | None = None,
) -> Comparison:
    """Fit the measurement and compare it with the roofline of `gpu` at every grid point."""
    p = params if params is not None else RooflineParams()
    fitted = fitted_profile(m, gpu, kv_capacity_bytes)
    roof = roofline_profile(m, gpu, p)
    points: list[PointComparison] = []
    for s in m.prefill:
        points.append(
            PointComparison(
                phase="prefill",
                n=s.n,
                x=s.length,
                measured_s=s.time_s,
                fitted_s=fitted.profile.prefill_time_s(s.n, s.length),
                roofline_s=roof.prefill_time_s(s.n, s.length),
                work=prefill_flops(m.shape, m.facts, s.n, s.length),
            )
        )
    for d in m.decode:
        points.append(
            PointComparison(
                phase="decode",
                n=d.n,
                x=d.context,
                measured_s=d.time_s,
                fitted_s=fitted.profile.decode_time_s(d.context, d.n),
                roofline_s=roof.decode_time_s(d.context, d.n),
                work=decode_bytes(m.facts, d.n, d.context),
            )
        )
    return Comparison(
        measurement=m,
        fitted=fitted,
        roofline=roof,
        gpu=gpu_spec(resolve_gpu(gpu)),
        roofline_params=p,
        points=tuple(points),
    )


def _sci(v: float) -> str:
    return f"{v:.3e}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def render_report(c: Comparison, profile_path: str | None = None) -> str:
    """The markdown comparison report."""
    m = c.measurement
    fp = c.fitted.profile
    rp = c.roofline
    g = c.gpu
    f = m.facts
    cpu_note = m.device != "cuda"
    title = f"# Forward-pass profile vs roofline: {m.shape.model} on {m.device} ({m.device_name})"
    where = f", written to `{profile_path}`" if profile_path else ""
    lines = [
        title,
        "",
        f"- measured profile: `{fp.source}` (gpu `{fp.gpu}`, tp 1{where})",
        f"- roofline profile: `{rp.source}` (gpu `{rp.gpu}`, model `{rp.model}`, "
        f"tp {rp.tensor_parallel})",
        f"- model: {m.shape.name} shape, {f.params:,} parameters, {f.weight_bytes / 1e9:.3f} GB "
        f"of {m.dtype} weights, {f.kv_bytes_per_token:,} KV bytes/token, random weights, SDPA",
        f"- timing: median of {m.grid.repeats} after {m.grid.warmup} warm-up calls, wall clock "
        f"with device synchronisation; torch {m.versions.get('torch', '?')}, transformers "
        f"{m.versions.get('transformers', '?')}",
        f"- build (random init on device): {m.build_s:.2f} s -> cold_load "
        f"{fp.cold_load_bytes_s / 1e9:.3g} GB/s; "
        f"{'pinned host->device' if not cpu_note else 'host memory'} copy "
        f"{m.swap_bytes_s / 1e9:.3g} GB/s -> swap_bytes_s",
        f"- KV capacity recorded: {fp.kv_capacity_bytes / 2**30:.2f} GiB "
        f"({fp.kv_capacity_tokens:,} tokens)",
    ]
    if cpu_note:
        lines += [
            "",
            f"> CPU run: the roofline columns are for {g.name}, so measured/roofline is the "
            f"CPU-to-{g.name} gap, not an error of the roofline, and the efficiency percentages "
            f"are of {g.name}'s datasheet peaks.",
        ]
    coeff_rows = []
    for name, mv, rv in (
        ("p1 (s per request·token)", fp.prefill.p1, rp.prefill.p1),
        ("p2 (s per request)", fp.prefill.p2, rp.prefill.p2),
        ("p3 (s per token of L)", fp.prefill.p3, rp.prefill.p3),
        ("p4 (s fixed)", fp.prefill.p4, rp.prefill.p4),
        ("d1 (s per request·context token)", fp.decode.d1, rp.decode.d1),
        ("d2 (s per request)", fp.decode.d2, rp.decode.d2),
        ("d3 (s per context token)", fp.decode.d3, rp.decode.d3),
        ("d4 (s fixed)", fp.decode.d4, rp.decode.d4),
    ):
        coeff_rows.append([name, _sci(mv), _sci(rv), _ratio(mv, rv)])
    pf, df = c.fitted.prefill_fit, c.fitted.decode_fit
    lines += [
        "",
        "## Coefficients",
        "",
        markdown_table(
            ["coefficient", "measured (fit)", "roofline", "measured/roofline"], coeff_rows
        ),
        "",
        f"Fit: prefill RMSE {pf.rmse_s * 1e3:.3f} ms, R² {pf.r2:.4f} ({pf.samples} samples); "
        f"decode RMSE {df.rmse_s * 1e3:.3f} ms, R² {df.r2:.4f} ({df.samples} samples).",
        "",
        "## Prefill steps",
        "",
    ]
    rows = [
        [
            str(p.n),
            f"{p.x:g}",
            f"{p.measured_s * 1e3:.3f}",
            f"{p.fitted_s * 1e3:.3f}",
            f"{p.roofline_s * 1e3:.3f}",
            f"{p.ratio:.2f}",
            f"{p.achieved / 1e12:.3g}",
            f"{100 * p.achieved / g.peak_flops:.3g}",
        ]
        for p in c.phase("prefill")
    ]
    headers = [
        "N",
        "L",
        "measured ms",
        "fit ms",
        "roofline ms",
        "measured/roofline",
        "achieved TFLOP/s",
        f"% of {g.name} peak",
    ]
    lines += [markdown_table(headers, rows, left=()), "", "## Decode steps", ""]
    rows = [
        [
            str(p.n),
            f"{p.x:g}",
            f"{p.measured_s * 1e3:.3f}",
            f"{p.fitted_s * 1e3:.3f}",
            f"{p.roofline_s * 1e3:.3f}",
            f"{p.ratio:.2f}",
            f"{p.achieved / 1e9:.3g}",
            f"{100 * p.achieved / g.hbm_bytes_s:.3g}",
        ]
        for p in c.phase("decode")
    ]
    headers = [
        "N",
        "context",
        "measured ms",
        "fit ms",
        "roofline ms",
        "measured/roofline",
        "achieved GB/s",
        f"% of {g.name} HBM",
    ]
    rp_params = c.roofline_params
    lines += [
        markdown_table(headers, rows, left=()),
        "",
        "## Implied efficiency factors",
        "",
        f"- prefill: best achieved {max(p.achieved for p in c.phase('prefill')) / 1e12:.3g} "
        f"TFLOP/s = {100 * c.prefill_efficiency:.3g}% of {g.name}'s {g.peak_flops / 1e12:g} "
        f"TFLOP/s dense BF16 peak (the roofline assumes eff_compute = {rp_params.eff_compute:g}); "
        f"median measured/roofline {c.prefill_ratio_median:.2f}",
        f"- decode: best achieved {max(p.achieved for p in c.phase('decode')) / 1e9:.3g} GB/s "
        f"= {100 * c.decode_efficiency:.3g}% of {g.name}'s {g.hbm_bytes_s / 1e12:g} TB/s HBM "
        f"(the roofline assumes eff_mem = {rp_params.eff_mem:g}); median measured/roofline "
        f"{c.decode_ratio_median:.2f}",
        "- FLOPs count 2 per layer weight per prompt token, the LM head on the last position and "
        "causal attention; bytes count every weight but the input-embedding table once plus the "
        "KV of N·context tokens (DynamicCache's extra torch.cat copy is not counted as useful).",
        "",
    ]
    return "\n".join(lines)


def report_dict(c: Comparison) -> dict[str, Any]:
    """The profile file's "report": what was run, the fit quality and every compared point."""
    m = c.measurement
    return {
        "kind": "torch-forward",
        "shape": m.shape.name,
        "device": m.device,
        "device_name": m.device_name,
        "dtype": m.dtype,
        "versions": dict(m.versions),
        "grid": {"warmup": m.grid.warmup, "repeats": m.grid.repeats},
        "build_s": m.build_s,
        "swap_bytes_s": m.swap_bytes_s,
        "params": m.facts.params,
        "prefill_fit": {
            "rmse_s": c.fitted.prefill_fit.rmse_s,
            "r2": c.fitted.prefill_fit.r2,
            "samples": c.fitted.prefill_fit.samples,
        },
        "decode_fit": {
            "rmse_s": c.fitted.decode_fit.rmse_s,
            "r2": c.fitted.decode_fit.r2,
            "samples": c.fitted.decode_fit.samples,
        },
        "roofline_gpu": c.gpu.name,
        "roofline_source": c.roofline.source,
        "prefill_efficiency": c.prefill_efficiency,
        "decode_efficiency": c.decode_efficiency,
        "points": [
            {
                "phase": p.phase,
                "n": p.n,
                "x": p.x,
                "measured_s": p.measured_s,
                "fitted_s": p.fitted_s,
                "roofline_s": p.roofline_s,
                "ratio": p.ratio,
                "work": p.work,
            }
            for p in c.points
        ],
    }
