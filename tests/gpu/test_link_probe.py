"""The HELR inventory's link measurement on real GPUs (UELLM Algorithm 2)."""

from __future__ import annotations

import pytest

from services.deployer.core import GPUConfig, Inventory, InventoryNode
from services.deployer.link_probe import measure_links


@pytest.mark.gpu
def test_measure_links_on_local_gpus() -> None:
    got = measure_links(repeats=5, warmup=2, large_bytes=16 * 1024 * 1024)
    n = len(got.devices)
    assert n >= 1
    assert len(got.latency_s) == len(got.bandwidth_bytes_s) == n
    for row_lat, row_bw in zip(got.latency_s, got.bandwidth_bytes_s, strict=True):
        assert len(row_lat) == len(row_bw) == n
        assert all(0.0 < x < 1.0 for x in row_lat)  # seconds: a copy is µs, never a second
        assert all(x > 1e8 for x in row_bw)  # > 0.1 GB/s on any CUDA link
    links = got.as_links("local")
    assert len(links) == n * (n - 1) // 2
    inv = Inventory(
        nodes=(InventoryNode(name="local", gpus=(GPUConfig(type="H200-141GB", count=n),)),),
        links=tuple(links),
    )
    lat = inv.latency_matrix()
    for link in links:
        i, j = (int(g.split("/")[1]) for g in (link.a, link.b))
        assert lat[i, j] == lat[j, i] == link.latency_s
