"""Tenancy ablations of the `slomesh` stack: fairness between tenants and criticality bands.

`slomesh` runs QLM with bands (strict criticality order), VTC fairness between the tenants of a
band and shedding of sheddable work on (services/scheduler/core/fairness/). Each variant here
switches one of them off so its effect is measurable on the `tenants-skew` and `bands-overload`
scenarios.

With more than one tenant or band, `slomesh` queues even its tight classes in QLM's virtual
queues (direct dispatch would bypass bands and fairness; GroupSelector.contended).
`slomesh-no-fairness` is the flagship with fairness off, so one band of several tenants is
dispatched as for one tenant (tight classes directly to the engines' EDF queues);
`slomesh-queued-no-fairness` keeps every request in the virtual queues with fairness off, so
the comparison with `slomesh` isolates what VTC's order itself costs or gains.
"""

from __future__ import annotations

from slomesh.bench.stacks.base import StackConfig
from slomesh.bench.stacks.slomesh import SLOMESH

FAIRNESS_STACKS: list[StackConfig] = [
    SLOMESH.variant(
        "slomesh-no-fairness",
        "slomesh without fairness between tenants (the virtual queue's order across tenants)",
        policy_options={"tenancy": {"fairness": "off"}},
    ),
    SLOMESH.variant(
        "slomesh-queued-no-fairness",
        "slomesh with every request in QLM's virtual queues and fairness off (FCFS/EDF order "
        "across tenants)",
        policy_options={"tenancy": {"fairness": "off"}, "tight": {"direct_max_ttft_s": None}},
    ),
    SLOMESH.variant(
        "slomesh-no-bands",
        "slomesh without bands: criticality ignored, nothing shed",
        policy_options={"tenancy": {"bands": False, "shed": False}},
    ),
]
