"""Measure the links between this machine's GPUs with torch on CUDA, for the HELR inventory
(UELLM Algorithm 2's Latency(E[i][j]); services/deployer/README.md, "HELR"). Optional: torch is
imported lazily and only CUDA machines can run it (tests/gpu).

latency_s[i][j]: median wall time of copying a small tensor (default 16 KiB, about one decode
step's activations of a hidden-8192 bf16 model) from GPU i to GPU j, both devices synchronised
around each copy: launch, copy and synchronisation, i.e. what one pipeline hop costs end to end.
bandwidth_bytes_s[i][j]: bytes / median time of a large copy (default 64 MiB). The diagonal is
a copy within one GPU (HBM), reported but ignored by the inventory. One node only: inter-node
links go in the inventory's inter_node_latency_s or `links`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from services.deployer.core.inventory import LinkConfig


@dataclass(frozen=True, slots=True)
class LinkMeasurement:
    """Measured matrices over `devices` (CUDA ordinals), [from][to]."""

    devices: tuple[int, ...]
    latency_s: tuple[tuple[float, ...], ...]
    bandwidth_bytes_s: tuple[tuple[float, ...], ...]

    def as_links(self, node: str) -> list[LinkConfig]:
        """Inventory `links` for `node` (GPU "<node>/<ordinal>"), mean of both directions."""
        out: list[LinkConfig] = []
        n = len(self.devices)
        for i in range(n):
            for j in range(i + 1, n):
                lat = (self.latency_s[i][j] + self.latency_s[j][i]) / 2
                a, b = f"{node}/{self.devices[i]}", f"{node}/{self.devices[j]}"
                out.append(LinkConfig(a=a, b=b, latency_s=lat))
        return out


def _timed_copies(torch: Any, src: Any, dst_device: int, repeats: int, warmup: int) -> float:
    """Median seconds of src.to(dst_device), synchronising both devices around each copy."""
    devices = {src.device.index, dst_device}

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    times: list[float] = []
    for k in range(warmup + repeats):
        sync()
        t0 = time.perf_counter()
        src.to(f"cuda:{dst_device}", non_blocking=False, copy=True)
        sync()
        if k >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_links(
    devices: Sequence[int] | None = None,
    small_bytes: int = 16 * 1024,
    large_bytes: int = 64 * 1024 * 1024,
    repeats: int = 20,
    warmup: int = 3,
) -> LinkMeasurement:
    """Pairwise latency and bandwidth between the given CUDA devices (default: all)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("measure_links needs CUDA: torch.cuda.is_available() is False")
    devs = tuple(range(torch.cuda.device_count())) if devices is None else tuple(devices)
    if not devs:
        raise ValueError("measure_links: no CUDA devices to measure")
    lat: list[list[float]] = []
    bw: list[list[float]] = []
    for i in devs:
        small = torch.empty(small_bytes, dtype=torch.uint8, device=f"cuda:{i}")
        large = torch.empty(large_bytes, dtype=torch.uint8, device=f"cuda:{i}")
        lat.append([_timed_copies(torch, small, j, repeats, warmup) for j in devs])
        bw.append([large_bytes / _timed_copies(torch, large, j, repeats, warmup) for j in devs])
        del small, large
    return LinkMeasurement(devs, tuple(map(tuple, lat)), tuple(map(tuple, bw)))
