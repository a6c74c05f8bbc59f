"""GPU inventory and HELR parameters (UELLM Algorithm 2; deployer README) as typed config.

HELR needs, per GPU, Memory(d) (`memory_bytes`), Performance(d) (`speed_bytes_s`) and its node,
and the link latency between every ordered pair of GPUs; the tier plan needs each node's host
memory. A GPU whose `type` is a catalogued name (shared.profiles) takes its memory and speed from
the catalog unless given; any other type must give both.

Performance unit: `speed_bytes_s` is the rate in bytes/s at which the GPU streams weights through
a forward pass (single-token decode is memory-bound, so the datasheet HBM bandwidth; the catalog
default is `hbm_bytes_s`). HELR's compute term p·layers·m/speed is then in seconds, p being a
dimensionless efficiency multiplier (1/0.7 ≈ 1.43 matches the roofline's eff_mem).

Link latencies: default `intra_node_latency_s` between GPUs of one node and `inter_node_latency_s`
across nodes, replaced by the full `link_latency_s` matrix when given, and then by each entry of
`links` (either direction). Latencies may be asymmetric (a measured matrix need not be).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.profiles import gpu_names, gpu_spec

_CFG = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class GPUConfig(BaseModel):
    """`count` identical GPUs of one node."""

    model_config = _CFG

    type: str = Field(default="custom", min_length=1)
    """GPU type: a catalog name (A10-24GB, A100-80GB, H100-80GB, H200-141GB) gives defaults for
    memory and speed; any other name is a label and needs both."""

    count: int = Field(default=1, ge=1)
    """How many such GPUs the node has (they get consecutive indices)."""

    memory_bytes: int | None = Field(default=None, gt=0)
    """Memory(d): device memory in bytes (None: the catalog's figure for `type`)."""

    speed_bytes_s: float | None = Field(default=None, gt=0)
    """Performance(d): weight bytes streamed per second (None: catalog HBM bandwidth)."""

    @model_validator(mode="after")
    def _resolvable(self) -> GPUConfig:
        missing = [f for f in ("memory_bytes", "speed_bytes_s") if getattr(self, f) is None]
        if missing and self.type not in gpu_names():
            raise ValueError(
                f"GPU type '{self.type}' is not in the catalog ({', '.join(gpu_names())}): "
                f"give {' and '.join(missing)}"
            )
        return self


class InventoryNode(BaseModel):
    """One host: its GPUs (indices 0.. in listed order) and the host memory for warm models."""

    model_config = _CFG

    name: str = Field(min_length=1)
    """Node name (as the Ray node / Node.name knows it)."""

    gpus: tuple[GPUConfig, ...] = ()
    """The node's GPUs, grouped by identical configuration."""

    host_memory_bytes: int = Field(default=0, ge=0)
    """Host RAM in bytes available to keep swap-in models warm (QLM's CPU tier); 0: none."""


class LinkConfig(BaseModel):
    """Latency between two GPUs, named "<node>/<index>", in both directions."""

    model_config = _CFG

    a: str = Field(min_length=1)
    """First GPU, "<node>/<index>"."""

    b: str = Field(min_length=1)
    """Second GPU, "<node>/<index>"."""

    latency_s: float = Field(ge=0.0)
    """Latency of passing one step's activations between them, seconds."""


class Inventory(BaseModel):
    """The GPUs HELR may place layers on and the links between them (module docstring)."""

    model_config = _CFG

    nodes: tuple[InventoryNode, ...] = ()
    """Hosts in order; GPU order (the rows of link_latency_s) is node by node, index by index."""

    intra_node_latency_s: float = Field(default=1e-5, ge=0.0)
    """Default link latency between two GPUs of one node, seconds (NVLink/P2P: ~5-15 µs)."""

    inter_node_latency_s: float = Field(default=1e-4, ge=0.0)
    """Default link latency between GPUs of different nodes, seconds (RDMA/TCP: ~20-200 µs)."""

    link_latency_s: tuple[tuple[float, ...], ...] | None = None
    """Optional full matrix [from][to] in GPU order, seconds (diagonal ignored); replaces the
    intra/inter defaults."""

    links: tuple[LinkConfig, ...] = ()
    """Per-pair overrides, applied last (e.g. measured with services.deployer.link_probe)."""

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        names = [n.name for n in self.nodes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"inventory.nodes: duplicate node name(s) {', '.join(dup)}")
        ids = {g.id for g in self.gpus()}
        n = len(ids)
        if self.link_latency_s is not None:
            rows = self.link_latency_s
            if len(rows) != n or any(len(r) != n for r in rows):
                raise ValueError(f"inventory.link_latency_s must be {n}x{n} (one row per GPU)")
            if any(x < 0 for r in rows for x in r):
                raise ValueError("inventory.link_latency_s entries must be >= 0")
        for link in self.links:
            for end in (link.a, link.b):
                if end not in ids:
                    raise ValueError(f"inventory.links: unknown GPU '{end}' (want '<node>/<i>')")
        return self

    def gpus(self) -> tuple[InventoryGPU, ...]:
        """Every GPU, node by node, with memory and speed resolved."""
        out: list[InventoryGPU] = []
        for node in self.nodes:
            index = 0
            for g in node.gpus:
                memory, speed = g.memory_bytes, g.speed_bytes_s
                if memory is None or speed is None:  # validated: a catalogued type
                    spec = gpu_spec(g.type)
                    memory = spec.memory_bytes if memory is None else memory
                    speed = spec.hbm_bytes_s if speed is None else speed
                for _ in range(g.count):
                    out.append(InventoryGPU(node.name, index, g.type, memory, float(speed)))
                    index += 1
        return tuple(out)

    def latency_matrix(self) -> NDArray[np.float64]:
        """link latency [from][to] in seconds, GPU order, zero diagonal (module docstring)."""
        gpus = self.gpus()
        if self.link_latency_s is not None:
            lat = np.array(self.link_latency_s, dtype=np.float64).reshape(len(gpus), len(gpus))
        else:
            node = np.array([g.node for g in gpus], dtype=object)
            same = node[:, None] == node[None, :]
            lat = np.where(same, self.intra_node_latency_s, self.inter_node_latency_s)
            lat = lat.astype(np.float64)
        pos = {g.id: i for i, g in enumerate(gpus)}
        for link in self.links:
            i, j = pos[link.a], pos[link.b]
            lat[i, j] = lat[j, i] = link.latency_s
        np.fill_diagonal(lat, 0.0)
        return lat

    def host_memory(self) -> dict[str, int]:
        """host_memory_bytes of every node."""
        return {n.name: n.host_memory_bytes for n in self.nodes}


@dataclass(frozen=True, slots=True)
class InventoryGPU:
    """One resolved GPU: node, index on the node, type label, Memory(d), Performance(d)."""

    node: str
    index: int
    type: str
    memory_bytes: int
    speed_bytes_s: float

    @property
    def id(self) -> str:
        """ "<node>/<index>"."""
        return f"{self.node}/{self.index}"


class HELRParams(BaseModel):
    """Parameters of HELR (UELLM Algorithm 2); a1/a2 None take the planner's preset."""

    model_config = _CFG

    kv_reserve_bytes: int = Field(default=8_000_000_000, ge=0)
    """T: bytes every GPU keeps free of weights for KV cache and activations (8 GB)."""

    p: float = Field(default=1.0, gt=0.0)
    """Dimensionless multiplier of the compute term p·layers·m/speed (see module docstring)."""

    a1: float | None = Field(default=None, ge=0.0)
    """Weight of the route latency in milliseconds (None: helr-he 0, helr-lr 10)."""

    a2: float | None = Field(default=None, ge=0.0)
    """Weight of the number of GPUs used (None: 1 for both presets)."""

    max_dp_gpus: int = Field(default=18, ge=1, le=22)
    """Most distinct GPUs one DP run takes (memory 2^n·n floats); more are reported unplaced."""
