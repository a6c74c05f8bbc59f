"""Static descriptions of models and GPUs (what a datasheet or a model config says)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Shape of a decoder-only transformer, enough to size weights and KV cache.

    params: number of parameters. dtype_bytes: bytes per weight/KV element (2 for bf16/fp16).
    """

    name: str
    params: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2

    def __post_init__(self) -> None:
        for f in ("params", "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim"):
            if getattr(self, f) < 1:
                raise ValueError(f"model_spec.{f} must be >= 1 (model {self.name})")
        if self.dtype_bytes not in (1, 2, 4):
            raise ValueError(f"model_spec.dtype_bytes must be 1, 2 or 4, got {self.dtype_bytes}")

    @property
    def kv_bytes_per_token(self) -> int:
        """Δ = 2 (K and V) · layers · kv_heads · head_dim · dtype_bytes (SCLS Eq. 5)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    @property
    def layer_bytes(self) -> float:
        """Weight bytes of one decoder layer (embeddings spread evenly; HELR's m)."""
        return self.weight_bytes / self.layers


@dataclass(frozen=True, slots=True)
class GPUSpec:
    """One accelerator and the links around it (datasheet figures, bytes and FLOP/s)."""

    name: str
    memory_bytes: int
    hbm_bytes_s: float
    peak_flops: float
    pcie_bytes_s: float
    nvlink_bytes_s: float
    disk_bytes_s: float

    def __post_init__(self) -> None:
        for f in ("memory_bytes", "hbm_bytes_s", "peak_flops", "pcie_bytes_s", "disk_bytes_s"):
            if not getattr(self, f) > 0:
                raise ValueError(f"gpu_spec.{f} must be > 0 (gpu {self.name})")
