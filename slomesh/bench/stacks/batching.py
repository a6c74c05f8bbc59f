"""Batch-forming stacks on static-batching engines: SCLS, UELLM SLO-ODBS and their baselines.

`sls` (static batches, FCFS, fixed size, round-robin, run to completion) is a baseline
(baselines.py). `scls` = DP batching + max-min offloading + adaptive interval + slices of 128
iterations; the `scls-*` ablations swap one part for its baseline. UELLM's formers run each batch
to its longest predicted output (no slice; mispredicted requests come back to the pool);
`fifo-batching` is the FIFO baseline of UELLM Fig. 4.
"""

from __future__ import annotations

from slomesh.bench.stacks.base import StackConfig

SCLS = StackConfig(
    name="scls",
    description="SCLS: DP batching, max-min offloading, adaptive interval, slices of 128",
    policy="batching",
    engine_mode="static",
)

UELLM = SCLS.variant(
    "slo-odbs",
    "UELLM SLO-ODBS, threshold derived from the time/memory estimators",
    policy_options={"slice_iterations": None, "placer": "least-loaded", "former": "slo-odbs"},
)

BATCHING_STACKS: list[StackConfig] = [
    SCLS,
    SCLS.variant(
        "scls-fifo",
        "SCLS with FIFO fixed-size batches instead of DP batching",
        policy_options={"former": "fifo"},
    ),
    SCLS.variant(
        "scls-rr",
        "SCLS with round-robin placement instead of max-min",
        policy_options={"placer": "round-robin"},
    ),
    SCLS.variant(
        "scls-no-slice",
        "SCLS batches run to their longest output",
        policy_options={"slice_iterations": None},
    ),
    UELLM,
    UELLM.variant(
        "slo-odbs-overload",
        "UELLM SLO-ODBS (derived) that serves savable requests before lost ones and bounds "
        "batches by memory and padding waste only",
        policy_options={"odbs_lost_last": True, "odbs_slack_limit": False},
    ),
    UELLM.variant(
        "slo-odbs-paper",
        "UELLM SLO-ODBS with the reference code's constants",
        policy_options={"former": "slo-odbs-paper"},
    ),
    UELLM.variant("slo-dbs", "UELLM SLO-DBS (SLO term only)", policy_options={"former": "slo-dbs"}),
    UELLM.variant(
        "odbs", "UELLM ODBS (output-length term only)", policy_options={"former": "odbs"}
    ),
    UELLM.variant(
        "fifo-batching",
        "FIFO fixed-size batches (UELLM's baseline)",
        policy_options={"former": "fifo"},
    ),
    # the live mesh's mode: batches on continuous-batching engines, each member one slice,
    # formed at least every 0.5 s and at once for a slice end, as live (LIVE_BATCHING_OPTIONS)
    SCLS.variant(
        "scls-continuous",
        "SCLS on continuous-batching engines: DP batches join the running batch, each member "
        "leaves after its slice and is batched again (as `slomesh up --policy scls` serves)",
        engine_mode="continuous",
        policy_options={"min_interval_s": 0.5, "reform_on_slice_end": True},
    ),
    UELLM.variant(
        "slo-odbs-continuous",
        "UELLM SLO-ODBS on continuous-batching engines (as `slomesh up --policy slo-odbs`)",
        engine_mode="continuous",
        policy_options={"min_interval_s": 0.5, "reform_on_slice_end": True},
    ),
    UELLM.variant(
        "fifo-batching-continuous",
        "FIFO fixed-size batches on continuous-batching engines (the live FIFO baseline)",
        policy_options={"former": "fifo", "min_interval_s": 0.5, "reform_on_slice_end": True},
        engine_mode="continuous",
    ),
]
