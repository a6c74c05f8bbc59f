"""Measuring model swaps on vLLM: what a replica serving several models pays to change model.

The swaps run through the replica's own model host and loader (services/replica/model_host.py,
model_swap.py), so the measured time is the one a live replica sees: the engine of the old model
shut down, the new model's engine built (weights loaded), vLLM's OpenAI application set up on it
and a one-token warm-up request run. The models are cycled `repeats` times (A -> B -> C -> A ...),
each swap timed once; the profile of each model is the base profile (its step-time fit) with
the measured median swap time folded into its load bandwidths (`weight_bytes` / seconds, warm
and cold alike: a restart on CPU reads the weights again either way), so the simulator's and the
planner's swap cost (ModelTiers.load_time_s) is the measured time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from services.replica.model_host import ModelHost
from services.replica.model_swap import RestartLoader
from services.replica.vllm.openai_app import ServingOptions
from shared.domain import HardwareProfile


def measure_swaps(
    models: Sequence[str], build_engine: Callable[[str], Any], repeats: int
) -> dict[str, list[float]]:
    """Seconds of every swap to each model, cycling through `models` `repeats` times."""
    if len(models) < 2 or repeats < 1:
        raise ValueError("measure_swaps: at least 2 models and 1 repeat")

    async def run() -> dict[str, list[float]]:
        loader = RestartLoader(build_engine, {m: ServingOptions() for m in models})
        host: ModelHost[Any] = ModelHost(models, loader)
        await host.start()
        try:
            for _ in range(repeats):
                for m in [*models[1:], models[0]]:
                    async with host.use(m):
                        pass
        finally:
            active = await host.start()
            if active is not None:
                await loader.unload(host.active, active)
        failed = [s for s in host.swaps if not s.ok]
        if failed:
            raise RuntimeError(f"swap to {failed[0].to_model} failed while profiling")
        return {m: [s.seconds for s in host.swaps if s.to_model == m] for m in models}

    return asyncio.run(run())


def checkpoint_bytes(path: Path) -> int:
    """Bytes of a checkpoint's weight files (safetensors)."""
    return sum(f.stat().st_size for f in Path(path).glob("*.safetensors"))


def swap_profiles(
    base: HardwareProfile, swaps_s: dict[str, list[float]], weight_bytes: dict[str, int]
) -> list[HardwareProfile]:
    """One profile per model: `base`'s step times, the model's weights and measured swap."""
    out = []
    for model, times in swaps_s.items():
        seconds = statistics.median(times)
        bw = weight_bytes[model] / seconds
        out.append(
            dataclasses.replace(
                base,
                model=model,
                weight_bytes=weight_bytes[model],
                swap_bytes_s=bw,
                cold_load_bytes_s=bw,
                source=f"{base.source}; swap measured: median {seconds:.2f} s of {len(times)}",
            )
        )
    return out
