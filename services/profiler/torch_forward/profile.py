"""Profiles of the forward-pass profiler (pure): FLOP and byte accounting, the measured profile
fitted with shared.profiles.fit (non-negative, relative-error least squares) to
T_prefill(N, L) = p1·N·L + p2·N + p3·L + p4 and tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4, and
the roofline profile (`derive_profile` / `default_profile`) of the same GPU and model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from services.profiler.core.store import CPU_DEVICE
from services.profiler.torch_forward.measure import Measurement, ModelFacts
from services.profiler.torch_forward.shapes import ForwardShape, resolve_gpu
from shared.domain.hardware import ModelSpec
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.profiles.catalog import gpu_spec
from shared.profiles.defaults import default_profile
from shared.profiles.fit import FitResult, fit_decode, fit_prefill
from shared.profiles.roofline import RooflineParams, derive_profile

CPU_KV_CAPACITY_BYTES = 2**30
"""KV capacity recorded in a CPU profile unless one is given (1 GiB; nothing sizes it)."""


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
        f"{len(m.prefill)} prefill + {len(m.decode)} decode samples,"
        f"decode={m.decode_mode.split(':')[0]})"
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
