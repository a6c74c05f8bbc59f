"""QLM: the full policy and its ablations (one serving operation off, heuristic solver only)."""

from __future__ import annotations

from slomesh.bench.stacks.base import StackConfig

QLM = StackConfig(
    name="qlm",
    description=(
        "QLM: request groups, virtual queues, RWT estimator, ILP global scheduler, "
        "all serving operations"
    ),
    policy="qlm",
    queue_policy="edf",
    preemption_mode="auto",
)

QLM_STACKS: list[StackConfig] = [
    QLM,
    QLM.variant(
        "qlm-heuristic",
        "QLM with the heuristic global scheduler only (no ILP)",
        policy_options={"solver": {"solver": "heuristic"}},
    ),
    QLM.variant(
        "qlm-true-lengths",
        "QLM fed the true output lengths (no prediction error)",
        policy_options={"lengths": "true"},
    ),
    QLM.variant(
        "qlm-no-pull",
        "QLM ablation: requests pushed to their instance's FCFS engine queue at arrival",
        policy_options={"lso": {"pull": False}},
        queue_policy="fcfs",
    ),
    QLM.variant(
        "qlm-no-evict",
        "QLM ablation: no request eviction",
        policy_options={"lso": {"evict": False}},
    ),
    QLM.variant(
        "qlm-no-swap",
        "QLM ablation: model swaps ignored by the planner, nothing pre-warmed",
        policy_options={"lso": {"swap": False}},
    ),
    QLM.variant(
        "qlm-no-balance",
        "QLM ablation: groups pinned round-robin to instances",
        policy_options={"lso": {"balance": False}},
    ),
]
