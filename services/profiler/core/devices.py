"""The profile's device name for the device an engine runs on.

"cpu" for vLLM's CPU build. A CUDA device name ("NVIDIA A100-SXM4-80GB", "NVIDIA H200") maps to
the catalog GPU whose family ("A100" of "A100-80GB") is one of the name's words and whose
memory is within 20% of the device's (when known), so a profile lands on the key the scheduler
and simulator look up. An uncatalogued device keeps a name of its own: "<family>-<N>GB" when
only the memory differs (an A100 40GB), else the device name as reported.
"""

from __future__ import annotations

import re

from shared.profiles import gpu_names, gpu_spec

CPU = "cpu"
MEMORY_TOLERANCE = 0.2


def catalog_gpu_name(device_name: str, memory_bytes: int | None = None) -> str:
    """The catalog name of a CUDA device (module docstring)."""
    words = {w.upper() for w in re.split(r"[^A-Za-z0-9]+", device_name) if w}
    for name in gpu_names():
        family = name.split("-", 1)[0].upper()
        if family not in words:
            continue
        spec_mem = gpu_spec(name).memory_bytes
        if memory_bytes is None or abs(memory_bytes / spec_mem - 1) <= MEMORY_TOLERANCE:
            return name
        # devices report binary sizes; datasheets name the part by them (an "A100 40GB" has
        # 39.6 GiB = 42.5e9 bytes)
        return f"{name.split('-', 1)[0]}-{round(memory_bytes / 2**30)}GB"
    return device_name.strip()
