"""Wall-clock timing of the forward-pass profiler (torch imported inside the functions): the
median of synchronised calls after warm-up, and the host copy rate that stands in for swap."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(
    call: Callable[[], object],
    sync: Callable[[], None],
    warmup: int,
    repeats: int,
    reset: Callable[[], None] | None = None,
) -> float:
    """Median wall time of `call` (synchronised before and after); `reset` runs untimed after
    every call, warm-up included."""
    for _ in range(warmup):
        call()
        if reset is not None:
            reset()
    times: list[float] = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - t0)
        if reset is not None:
            reset()
    return statistics.median(times)


def measure_copy_bytes_s(device: str, nbytes: int, repeats: int = 5) -> float:
    """Bytes/s of a pinned host -> device copy (CUDA) or a host memory copy (CPU)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        src = torch.zeros(nbytes, dtype=torch.uint8).pin_memory()
        dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)

        def sync() -> None:
            torch.cuda.synchronize(dev)

        def copy() -> object:
            return dst.copy_(src, non_blocking=True)
    else:
        src = torch.zeros(nbytes, dtype=torch.uint8)
        dst = torch.zeros(nbytes, dtype=torch.uint8)

        def sync() -> None:
            return None

        def copy() -> object:
            return dst.copy_(src)

    return nbytes / median_time(copy, sync, warmup=1, repeats=repeats)
