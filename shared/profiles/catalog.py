"""Catalog of the GPUs and models slomesh knows by name (datasheet and model-config figures).

Units: bytes, bytes/s and FLOP/s, all decimal (1 GB = 1e9 bytes, 1 TB/s = 1e12 bytes/s) because
that is how the datasheets quote them.

GPU memory is the datasheet's nominal decimal capacity ("80GB" -> 80e9 bytes). The usable total that
nvidia-smi reports is a little larger for the 80/141 GB parts (e.g. 81920 MiB ≈ 85.9e9 bytes on an
A100-80GB) and about equal on the A10 (23028 MiB ≈ 24.1e9), so the nominal figure is the
conservative choice for sizing the KV cache.

peak_flops is dense BF16 tensor-core throughput (the datasheets also quote a 2x "with sparsity"
figure, which LLM serving does not get). pcie_bytes_s is an *effective* host<->device copy rate
(pinned memory, one direction), below the link's theoretical 32 GB/s (Gen4 x16) or 64 GB/s
(Gen5 x16). nvlink_bytes_s is the per-GPU NVLink figure of the datasheet; a GPU without NVLink
(A10) talks to its peers over PCIe, so its PCIe figure is used there.

disk_bytes_s = 2 GB/s: an effective rate for loading safetensors from a local datacenter NVMe SSD.
A PCIe Gen4 NVMe datasheet quotes 3-7 GB/s sequential read; deserialisation, page-cache misses and
host->device staging cost a good part of that, so we assume 2 GB/s end to end (a 16 GB checkpoint
cold-loads in ~8 s). Replace it with a measured figure where one exists.

Model shapes come from each model's public Hugging Face config.json; params is the total
parameter count of the published safetensors (embeddings and LM head included).
"""

from __future__ import annotations

from shared.domain.hardware import GPUSpec, ModelSpec
from shared.policy.registry import UnknownNameError

GB = 1e9
TB = 1e12
TFLOPS = 1e12

NVME_BYTES_S = 2.0 * GB
"""Effective cold-load rate from local NVMe (see module docstring)."""

PCIE_GEN4_EFFECTIVE_BYTES_S = 25.0 * GB
"""Pinned host<->device copy over PCIe Gen4 x16 (32 GB/s raw per direction)."""

PCIE_GEN5_EFFECTIVE_BYTES_S = 50.0 * GB
"""Pinned host<->device copy over PCIe Gen5 x16 (64 GB/s raw per direction)."""

_GPUS: tuple[GPUSpec, ...] = (
    # NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s, BF16 tensor 125 TFLOPS dense (250 sparse),
    # PCIe Gen4 x16, no NVLink -> peers are reached over PCIe.
    GPUSpec(
        name="A10-24GB",
        memory_bytes=int(24 * GB),
        hbm_bytes_s=600.0 * GB,
        peak_flops=125.0 * TFLOPS,
        pcie_bytes_s=PCIE_GEN4_EFFECTIVE_BYTES_S,
        nvlink_bytes_s=PCIE_GEN4_EFFECTIVE_BYTES_S,
        disk_bytes_s=NVME_BYTES_S,
    ),
    # NVIDIA A100 80GB SXM datasheet: 80 GB HBM2e, 2,039 GB/s, BF16 tensor 312 TFLOPS dense,
    # NVLink 600 GB/s, PCIe Gen4.
    GPUSpec(
        name="A100-80GB",
        memory_bytes=int(80 * GB),
        hbm_bytes_s=2.039 * TB,
        peak_flops=312.0 * TFLOPS,
        pcie_bytes_s=PCIE_GEN4_EFFECTIVE_BYTES_S,
        nvlink_bytes_s=600.0 * GB,
        disk_bytes_s=NVME_BYTES_S,
    ),
    # NVIDIA H100 SXM5 datasheet: 80 GB HBM3, 3.35 TB/s, BF16 tensor 989 TFLOPS dense
    # (1,979 sparse), NVLink 900 GB/s, PCIe Gen5.
    GPUSpec(
        name="H100-80GB",
        memory_bytes=int(80 * GB),
        hbm_bytes_s=3.35 * TB,
        peak_flops=989.0 * TFLOPS,
        pcie_bytes_s=PCIE_GEN5_EFFECTIVE_BYTES_S,
        nvlink_bytes_s=900.0 * GB,
        disk_bytes_s=NVME_BYTES_S,
    ),
    # NVIDIA H200 SXM datasheet: 141 GB HBM3e, 4.8 TB/s, BF16 tensor 989 TFLOPS dense,
    # NVLink 900 GB/s, PCIe Gen5.
    GPUSpec(
        name="H200-141GB",
        memory_bytes=int(141 * GB),
        hbm_bytes_s=4.8 * TB,
        peak_flops=989.0 * TFLOPS,
        pcie_bytes_s=PCIE_GEN5_EFFECTIVE_BYTES_S,
        nvlink_bytes_s=900.0 * GB,
        disk_bytes_s=NVME_BYTES_S,
    ),
)

_MODELS: tuple[ModelSpec, ...] = (
    # mistralai/Mistral-7B-v0.1 config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads
    # (GQA), head_dim 4096/32 = 128, bf16. (Its 4096-token sliding window does not change the
    # KV bytes per token.)
    ModelSpec(
        name="mistral-7b",
        params=7_241_732_096,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
    ),
    # meta-llama/Llama-3.1-8B config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads,
    # head_dim 128, bf16.
    ModelSpec(
        name="llama-3.1-8b",
        params=8_030_261_248,
        layers=32,
        hidden_size=4096,
        attention_heads=32,
        kv_heads=8,
        head_dim=128,
    ),
    # meta-llama/Llama-2-13b-hf config.json (also the shape of lmsys/vicuna-13b-v1.5):
    # 40 layers, hidden 5120, 40 heads, 40 KV heads (no GQA), head_dim 128, bf16.
    ModelSpec(
        name="llama-2-13b",
        params=13_015_864_320,
        layers=40,
        hidden_size=5120,
        attention_heads=40,
        kv_heads=40,
        head_dim=128,
    ),
    # meta-llama/Llama-2-70b-hf config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads,
    # head_dim 128, bf16.
    ModelSpec(
        name="llama-2-70b",
        params=68_976_648_192,
        layers=80,
        hidden_size=8192,
        attention_heads=64,
        kv_heads=8,
        head_dim=128,
    ),
)


def gpu_names() -> list[str]:
    """Names of every catalogued GPU, in catalog order (smallest to largest)."""
    return [g.name for g in _GPUS]


def model_names() -> list[str]:
    """Names of every catalogued model, in catalog order (smallest to largest)."""
    return [m.name for m in _MODELS]


def gpu_spec(name: str) -> GPUSpec:
    """The catalogued GPU called `name`; UnknownNameError (listing valid names) otherwise."""
    for g in _GPUS:
        if g.name == name:
            return g
    raise UnknownNameError("gpu", name, gpu_names())


def model_spec(name: str) -> ModelSpec:
    """The catalogued model called `name`; UnknownNameError (listing valid names) otherwise."""
    for m in _MODELS:
        if m.name == name:
            return m
    raise UnknownNameError("model", name, model_names())
