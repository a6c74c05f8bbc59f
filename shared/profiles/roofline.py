"""Roofline-derived hardware profiles: step-time coefficients from datasheet figures alone.

Used for GPUs/models that have not been measured (shared/README.md); the result says so in its
`source` ("derived:roofline(...)" with the efficiency factors). Notation: W = model weight bytes,
P = parameters, Δ = KV bytes per token, tp = tensor-parallel degree, B = tp·hbm·eff_mem (effective
aggregate memory bandwidth), F = tp·peak·eff_compute (effective aggregate FLOP/s), layers, heads
and head_dim from the model config.

Fixed cost of one forward pass (shared by decode and prefill):
    T_fix = W / B                          every step streams all weights from HBM once
          + launch_overhead_s              kernel launches, scheduler, sampling (per step)
          + 2·layers·allreduce_latency_s   only when tp > 1: two all-reduces per layer
                                           (after attention and after the MLP), latency-bound

Decode (memory-bound; SCLS Eq. 4, tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4):
    d4 = T_fix
    d1 = Δ / B + 4·layers·heads·head_dim / F
         each sequence reads the K and V of every context token; the attention FLOPs on them
         (QKᵀ and AV, 2 FLOPs per multiply-add) are added too; relative to the read they are
         2·heads/(kv_heads·dtype_bytes) divided by the F/B FLOP-per-byte ratio (100-200 on these
         GPUs), i.e. a few %.
    d2 = 2·P / F + per_seq_overhead_s + AR
         the matmul FLOPs of one new token (2 per weight), invisible at batch 1 but the dominant
         term at batch ~100+; plus a small per-sequence bookkeeping cost (sampling, detokenise,
         block tables) and, for tp > 1, the all-reduce bandwidth term AR below.
    d3 = 0  nothing scales with context independently of the batch.

Prefill (compute-bound; T_prefill(N, L) = p1·N·L + p2·N + p3·L + p4):
    p1 = 2·P / F + 2·layers·heads·head_dim·L_ref / F + AR
         matmul FLOPs per prompt token plus causal attention. Attention of a length-L prompt
         costs 4·layers·heads·head_dim·L²/2 FLOPs (each token attends to L/2 earlier tokens on
         average), i.e. an N·L² term the bilinear form cannot express. We fold it into p1 at a
         reference length L_ref (attention_ref_len): exact at L = L_ref, over-estimates shorter
         prompts and under-estimates longer ones. Attention's share of prefill FLOPs is
         layers·heads·head_dim·L / P (≈ 2% at 1K tokens for an 8B model), so the error stays
         small below ~8K tokens.
    p2 = per_seq_overhead_s
    p3 = 0  with packed (unpadded) prefill no cost scales with the longest prompt alone.
    p4 = T_fix  the weight read is paid once per step and is *added* to the compute time rather
         than overlapped (max) because the estimator form is additive; this is conservative
         for short prompts, where the two are of the same order.

All-reduce bandwidth (tp > 1): per token and per all-reduce a ring moves 2·(tp−1)/tp of the
activation (hidden_size·dtype_bytes) through each GPU's peer link, so
    AR = 2·layers · 2·(tp−1)/tp · hidden_size·dtype_bytes / (nvlink_bytes_s·eff_mem).
The datasheet NVLink figure is a bidirectional aggregate, so this is optimistic by up to 2x on a
term that is ~1-2% of the step on NVLink parts; on PCIe-only parts (A10) it matters and is kept.

Memory (SCLS Eq. 6, M_ava = M_cap − M_model − M_engine; per instance of tp GPUs):
    kv_capacity_bytes = ζ·tp·memory − W − tp·engine_overhead_bytes
where ζ is vLLM's gpu_memory_utilization and engine_overhead_bytes the activation/workspace/CUDA
graph reserve of each GPU. The model "fits" when that leaves room for more than min_kv_tokens
tokens of KV; otherwise derive_profile raises ValueError naming the tensor_parallel it needs.

Links: swap_bytes_s = tp·pcie (each GPU swaps its KV shard over its own PCIe link in parallel);
cold_load_bytes_s = disk. inefficiency (ε) is 1.0: it is measured later, never derived.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from shared.domain.hardware import GPUSpec, ModelSpec
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs


class RooflineParams(BaseModel):
    """Efficiency factors and memory reserves that turn datasheet peaks into a step-time model."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    eff_mem: float = Field(default=0.7, gt=0.0, le=1.0)
    """Fraction of datasheet HBM bandwidth that decode kernels sustain (GEMV/paged attention
    typically reach 60-80%)."""

    eff_compute: float = Field(default=0.5, gt=0.0, le=1.0)
    """Fraction of dense BF16 peak that prefill GEMMs plus attention sustain end to end
    (model FLOPs utilisation of serving prefill is typically 40-60%)."""

    launch_overhead_s: float = Field(default=0.0015, ge=0.0)
    """Fixed cost of one engine step besides reading weights: kernel launches, scheduling and
    sampling. 1.5 ms matches vLLM with CUDA graphs (its default); eager mode costs ~4 ms or more
    per step on an 8B model. With 4 ms, batch-1 decode of Llama-3.1-8B would come out at
    ~15 ms/token on an A100 and ~11 ms on an H100, above the 10-14 / 6-9 ms sanity ranges this
    roofline is checked against."""

    per_seq_overhead_s: float = Field(default=1e-5, ge=0.0)
    """Per-sequence cost of a step (sampling, detokenising, block-table updates): d2 and p2."""

    allreduce_latency_s: float = Field(default=1e-5, ge=0.0)
    """Latency of one small tensor-parallel all-reduce (NCCL on NVLink is ~5-15 µs); two per
    layer per step. Unused when tensor_parallel == 1."""

    attention_ref_len: int = Field(default=1024, ge=1)
    """Prompt length at which prefill's quadratic attention cost is folded into p1."""

    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)
    """ζ: fraction of each GPU's memory the engine may use (vLLM gpu_memory_utilization)."""

    engine_overhead_bytes: int = Field(default=2 * 2**30, ge=0)
    """Per-GPU reserve for activations, workspace and CUDA graphs (2 GiB)."""

    min_kv_tokens: int = Field(default=2048, ge=1)
    """The model fits only if its KV capacity exceeds this many tokens (one long request)."""

    def label(self) -> str:
        """Short description of the factors, for a profile's `source`."""
        return (
            f"eff_mem={self.eff_mem:g},eff_compute={self.eff_compute:g},"
            f"launch={self.launch_overhead_s * 1e3:g}ms,zeta={self.gpu_memory_utilization:g}"
        )


def kv_capacity_bytes(
    gpu: GPUSpec, model: ModelSpec, tensor_parallel: int, params: RooflineParams
) -> int:
    """ζ·tp·memory − weight bytes − tp·engine overhead (may be negative: does not fit)."""
    tp = tensor_parallel
    usable = params.gpu_memory_utilization * tp * gpu.memory_bytes
    return math.floor(usable - model.weight_bytes - tp * params.engine_overhead_bytes)


def fits(gpu: GPUSpec, model: ModelSpec, tensor_parallel: int, params: RooflineParams) -> bool:
    """Whether tp GPUs leave room for more than min_kv_tokens tokens of KV after the weights."""
    room = params.min_kv_tokens * model.kv_bytes_per_token
    return kv_capacity_bytes(gpu, model, tensor_parallel, params) > room


def min_tensor_parallel(gpu: GPUSpec, model: ModelSpec, params: RooflineParams) -> int | None:
    """Smallest integer tp with which the model fits by memory alone; None if no tp can help."""
    per_gpu = params.gpu_memory_utilization * gpu.memory_bytes - params.engine_overhead_bytes
    if per_gpu <= 0:
        return None
    needed = model.weight_bytes + params.min_kv_tokens * model.kv_bytes_per_token
    tp = max(1, math.floor(needed / per_gpu))
    while not fits(gpu, model, tp, params):
        tp += 1
    return tp


def check_tensor_parallel(model: ModelSpec, tensor_parallel: int) -> None:
    """tp must be a positive integer dividing the attention heads (how vLLM shards attention)."""
    if isinstance(tensor_parallel, bool) or not isinstance(tensor_parallel, int):
        raise ValueError(f"tensor_parallel must be an int, got {tensor_parallel!r}")
    if tensor_parallel < 1:
        raise ValueError(f"tensor_parallel must be >= 1, got {tensor_parallel}")
    if model.attention_heads % tensor_parallel != 0:
        raise ValueError(
            f"tensor_parallel={tensor_parallel} must divide the {model.attention_heads} "
            f"attention heads of {model.name}"
        )


def _not_fit_message(
    gpu: GPUSpec, model: ModelSpec, tensor_parallel: int, params: RooflineParams
) -> str:
    head = (
        f"{model.name} ({model.weight_bytes / 1e9:.1f} GB of weights) does not fit on "
        f"{tensor_parallel} x {gpu.name}"
    )
    rule = (
        f" (rule: ζ·tp·memory − weights − tp·engine_overhead must exceed "
        f"{params.min_kv_tokens} tokens of KV; ζ={params.gpu_memory_utilization:g}, "
        f"engine_overhead={params.engine_overhead_bytes / 2**30:g} GiB per GPU)"
    )
    need = min_tensor_parallel(gpu, model, params)
    if need is None:
        return f"{head}: no tensor_parallel helps{rule}"
    return f"{head}: needs tensor_parallel >= {need}{rule}"


def derive_profile(
    gpu: GPUSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
    params: RooflineParams | None = None,
) -> HardwareProfile:
    """Roofline profile of `model` on `tensor_parallel` x `gpu` (see the module docstring).

    Raises ValueError when tp is invalid or the weights leave too little room for a KV cache.
    """
    p = params if params is not None else RooflineParams()
    tp = tensor_parallel
    check_tensor_parallel(model, tp)
    if not fits(gpu, model, tp, p):
        raise ValueError(_not_fit_message(gpu, model, tp, p))

    bandwidth = tp * gpu.hbm_bytes_s * p.eff_mem
    flops = tp * gpu.peak_flops * p.eff_compute
    attn_flops_per_ctx_token = 4 * model.layers * model.attention_heads * model.head_dim

    allreduce_fixed = 0.0
    allreduce_per_token = 0.0
    if tp > 1:
        n_allreduce = 2 * model.layers
        ring_bytes = 2 * (tp - 1) / tp * model.hidden_size * model.dtype_bytes
        allreduce_fixed = n_allreduce * p.allreduce_latency_s
        allreduce_per_token = n_allreduce * ring_bytes / (gpu.nvlink_bytes_s * p.eff_mem)

    fixed = model.weight_bytes / bandwidth + p.launch_overhead_s + allreduce_fixed
    matmul_per_token = 2 * model.params / flops

    decode = DecodeCoeffs(
        d1=model.kv_bytes_per_token / bandwidth + attn_flops_per_ctx_token / flops,
        d2=matmul_per_token + p.per_seq_overhead_s + allreduce_per_token,
        d3=0.0,
        d4=fixed,
    )
    prefill_attention = attn_flops_per_ctx_token / 2 * p.attention_ref_len / flops
    prefill = PrefillCoeffs(
        p1=matmul_per_token + prefill_attention + allreduce_per_token,
        p2=p.per_seq_overhead_s,
        p3=0.0,
        p4=fixed,
    )
    return HardwareProfile(
        gpu=gpu.name,
        model=model.name,
        tensor_parallel=tp,
        prefill=prefill,
        decode=decode,
        kv_capacity_bytes=kv_capacity_bytes(gpu, model, tp, p),
        kv_bytes_per_token=model.kv_bytes_per_token,
        weight_bytes=model.weight_bytes,
        swap_bytes_s=tp * gpu.pcie_bytes_s,
        cold_load_bytes_s=gpu.disk_bytes_s,
        inefficiency=1.0,
        source=f"derived:roofline({p.label()})",
    )
