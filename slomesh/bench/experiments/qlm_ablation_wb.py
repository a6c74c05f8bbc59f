"""`qlm-ablation-wb`: QLM paper Fig. 14 - contribution of each LSO on the multi-model workload.

Paper: WB at 0.25K Batch-1 req/s, the middle of its Fig. 12-13 sweep; model swapping (warm
start) contributes most to both attainment and throughput, the other LSOs to latency SLOs. Here:
the `qlm-wb` scenario with batch-1 at 2 req/s (batch-2 0.5): the rate at which swapping
matters - at the scenario's default of 0.5 req/s qlm and qlm-no-swap both meet ~96% of SLOs,
at 2 req/s qlm-no-swap loses about 10 points of attainment and 10-15% of throughput (1,000
requests, seed 0; the ILP's wall-clock time limit makes qlm runs vary a little) as the planner
stops batching groups by model.
"""

from __future__ import annotations

from typing import ClassVar

from slomesh.bench.experiments.qlm_ablation_wa import QLMAblationWA


class QLMAblationWB(QLMAblationWA):
    """Fig. 14: qlm with each LSO removed on qlm-wb at batch-1 2 req/s."""

    name: ClassVar[str] = "qlm-ablation-wb"
    figure: ClassVar[str] = "Fig. 14"
    description: ClassVar[str] = (
        "qlm-wb at batch-1 2 req/s (swapping-bound): qlm and each LSO removed; SLO attainment "
        "and throughput"
    )
    default_requests: ClassVar[int] = 1000
    scenario: ClassVar[str] = "qlm-wb"
    stream_rate: ClassVar[tuple[str, float] | None] = ("batch-1", 2.0)
