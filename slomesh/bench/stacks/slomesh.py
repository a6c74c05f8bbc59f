"""The combined `slomesh` stack and its ablations.

`slomesh` = QLM queue management (request groups, virtual queues, RWT-driven global scheduler,
pulling, eviction, swapping, balancing) in front of continuous-batching engines that run
SCORPIO's guards (LDF queue, TTFT guard, VBS admission, credit batching). On static-batching
engines the best batching is SCLS's (DP batching, max-min offloading, slices): `slomesh-static`.
Each `slomesh-no-<part>` switches one part off, so the parts' contributions are measurable;
`slomesh-no-prefix` drops prefix-cache-aware placement (services/scheduler/core/
prefix_affinity.py).
`slomesh-queued-tight` and `slomesh-evict-blind` undo the two flagship refinements
(direct dispatch to engines with the model loaded, cost-aware eviction: FLAGSHIP_QLM_OPTIONS).
`slomesh-true-lengths` feeds QLM the true output lengths instead of the length predictor's, so
the attainment lost to prediction error is measurable (SCORPIO's guards use no output lengths).
"""

from __future__ import annotations

from shared.domain.scorpio import ScorpioConfig
from slomesh.bench.stacks.base import StackConfig
from slomesh.bench.stacks.batching import SCLS

FLAGSHIP_QLM_OPTIONS: dict[str, object] = {
    "tight": {
        "direct_max_ttft_s": 3600.0,
        "active_model_only": True,
        "yield_to_swaps": True,
        "single_model_only": True,
    },
    "eviction": {"weigh_cost": True},
}
"""QLM options of the flagship (services/scheduler/core/qlm/tight_classes.py): a request
of any preset class (TTFT SLO up to an hour) whose model is loaded on an instance goes straight
to the least-loaded such engine, whose EDF queue and SCORPIO guards order and reject it; only
requests whose model is loaded nowhere, or that would go to an instance with another model's
group queued (its planned swap goes first), wait in QLM's virtual queues, where the planner
batches model swaps. On an instance that serves several models (qlm-wb, qlm-wc) nothing is
dispatched directly (`single_model_only`): QLM's planner must see all of that instance's work to
batch the swaps. Holding requests in QLM's queues behind the 4-request window costs capacity
on the single-model scenarios, so there every class goes direct (both measured:
docs/results/design.md). Eviction goes ahead only when the victims' re-prefill costs less than
the wait it saves."""

SLOMESH_NO_PREFIX = StackConfig(
    name="slomesh-no-prefix",
    description="slomesh without prefix-cache-aware placement (the engines still cache prefixes)",
    policy="qlm",
    policy_options=FLAGSHIP_QLM_OPTIONS,
    queue_policy="edf",
    preemption_mode="auto",
    scorpio=ScorpioConfig(),
)

SLOMESH = SLOMESH_NO_PREFIX.variant(
    "slomesh",
    "QLM queue management + SCORPIO guards on continuous engines, prefix-cache-aware placement",
    policy_options={"prefix": {"enabled": True}},
)

SLOMESH_STACKS: list[StackConfig] = [
    SLOMESH,
    SLOMESH.variant(
        "slomesh-true-lengths",
        "slomesh with QLM fed the true output lengths (oracle)",
        policy_options={"lengths": "true"},
    ),
    SLOMESH_NO_PREFIX,
    StackConfig(
        name="slomesh-no-qlm",
        description="slomesh without QLM (least-loaded routing)",
        policy="least-loaded",
        queue_policy="edf",
        preemption_mode="auto",
        scorpio=ScorpioConfig(),
    ),
    SLOMESH.variant(
        "slomesh-queued-tight",
        "slomesh with every class in QLM's virtual queues (no direct dispatch)",
        policy_options={"tight": {"direct_max_ttft_s": None}},
    ),
    SLOMESH.variant(
        "slomesh-evict-blind",
        "slomesh evicting whenever the head is urgent, whatever the re-prefill costs (the paper)",
        policy_options={"eviction": {"weigh_cost": False}},
    ),
    SLOMESH.variant("slomesh-no-scorpio", "slomesh without SCORPIO's guards (= qlm)", scorpio=None),
    SLOMESH.variant(
        "slomesh-no-credit", "slomesh without credit batching", scorpio={"credit_batching": False}
    ),
    SLOMESH.variant(
        "slomesh-no-vbs", "slomesh without VBS admission", scorpio={"vbs_admission": False}
    ),
    SLOMESH.variant(
        "slomesh-no-guard", "slomesh without the TTFT guard", scorpio={"ttft_guard": False}
    ),
    SCLS.variant(
        "slomesh-static",
        "slomesh on static-batching engines: SCLS DP batching, max-min offloading, slices",
    ),
]
