"""Batch-forming stacks on static-batching engines: SCLS, UELLM SLO-ODBS and their baselines.

`sls` (static batches, FCFS, fixed size, round-robin, run to completion) lives in stacks.py.
`scls` = DP batching + max-min offloading + adaptive interval + slices of 128 iterations; the
`scls-*` ablations swap one part for its baseline. UELLM's formers run each batch to its longest
predicted output (no slice; mispredicted requests come back to the pool); `fifo-batching` is the
FIFO baseline of UELLM Fig. 4.
"""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.batching.config import BatchingConfig
from services.scheduler.batching.policy import BatchingPolicy
from services.scheduler.stack import ServingStack

_UELLM: dict[str, object] = {"slice_iterations": None, "placer": "least-loaded"}

BATCHING_STACKS: dict[str, tuple[str, dict[str, object]]] = {
    "scls": ("SCLS: DP batching, max-min offloading, adaptive interval, slices of 128", {}),
    "scls-fifo": ("SCLS with FIFO fixed-size batches instead of DP batching", {"former": "fifo"}),
    "scls-rr": ("SCLS with round-robin placement instead of max-min", {"placer": "round-robin"}),
    "scls-no-slice": ("SCLS batches run to their longest output", {"slice_iterations": None}),
    "slo-odbs": (
        "UELLM SLO-ODBS, threshold derived from the time/memory estimators",
        _UELLM | {"former": "slo-odbs"},
    ),
    "slo-odbs-paper": (
        "UELLM SLO-ODBS with the reference code's constants",
        _UELLM | {"former": "slo-odbs-paper"},
    ),
    "slo-dbs": ("UELLM SLO-DBS (SLO term only)", _UELLM | {"former": "slo-dbs"}),
    "odbs": ("UELLM ODBS (output-length term only)", _UELLM | {"former": "odbs"}),
    "fifo-batching": ("FIFO fixed-size batches (UELLM's baseline)", _UELLM | {"former": "fifo"}),
}


def batching_stack(name: str, description: str, config: BatchingConfig) -> ServingStack:
    return ServingStack(
        name,
        description,
        lambda: BatchingPolicy(config),
        "fcfs",
        engine_mode="static",
    )


def batching_stack_factories() -> dict[str, Callable[[], ServingStack]]:
    def make(name: str, desc: str, overrides: dict[str, object]) -> Callable[[], ServingStack]:
        config = BatchingConfig.model_validate(overrides)
        return lambda: batching_stack(name, desc, config)

    return {name: make(name, desc, ov) for name, (desc, ov) in BATCHING_STACKS.items()}
