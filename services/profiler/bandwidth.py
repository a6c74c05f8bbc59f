"""Measured host<->device copy bandwidth: the profile's swap_bytes_s (KV swap, warm model load).

On CPU there is no device: a swap is a copy between two host buffers, so that is what is timed.
On CUDA: a pinned host buffer copied to the device (vLLM's swap path), synchronised. The figure
is the median over `repeats` copies after one untimed warm-up copy (median: see
services/profiler/core/profile_fit.py).
"""

from __future__ import annotations

import statistics
import time

DEFAULT_COPY_BYTES = 64 << 20


def measure_copy_bytes_s(
    device: str = "cpu", size_bytes: int = DEFAULT_COPY_BYTES, repeats: int = 5
) -> float:
    """Bytes per second of one `size_bytes` copy host->`device` (host->host for "cpu")."""
    import torch

    if size_bytes < 1 or repeats < 1:
        raise ValueError("size_bytes and repeats must be >= 1")
    on_cuda = device != "cpu"
    src = torch.ones(size_bytes, dtype=torch.uint8, pin_memory=on_cuda)
    dst = torch.empty(size_bytes, dtype=torch.uint8, device=device)

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize(device)

    dst.copy_(src, non_blocking=on_cuda)
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=on_cuda)
        sync()
        times.append(time.perf_counter() - t0)
    return size_bytes / statistics.median(times)
