"""CUDA device names map to the catalog GPU names the scheduler and simulator look up."""

from __future__ import annotations

import pytest

from services.profiler.core.devices import catalog_gpu_name


@pytest.mark.parametrize(
    ("device", "memory_bytes", "name"),
    [
        ("NVIDIA A100-SXM4-80GB", 85_899_345_920, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", None, "A100-80GB"),
        ("NVIDIA A10", 23_836_229_632, "A10-24GB"),  # not mistaken for an A100
        ("NVIDIA H100 80GB HBM3", 85_520_809_984, "H100-80GB"),
        ("NVIDIA H200", 150_754_820_096, "H200-141GB"),
        ("NVIDIA A100-SXM4-40GB", 42_505_273_344, "A100-40GB"),  # not the catalog's 80 GB part
        ("NVIDIA L4", 23_580_000_000, "NVIDIA L4"),  # uncatalogued: its own name
    ],
)
def test_catalog_gpu_name(device: str, memory_bytes: int | None, name: str) -> None:
    assert catalog_gpu_name(device, memory_bytes) == name
