"""Tenancy ablations of the `slomesh` stack: fairness between tenants and criticality bands.

`slomesh` runs QLM with bands (strict criticality order), VTC fairness between the tenants of a
band and shedding of sheddable work on (services/scheduler/core/fairness/). Each variant here
switches one of them off so its effect is measurable on the `tenants-skew` and `bands-overload`
scenarios.
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
        "slomesh-no-bands",
        "slomesh without bands: criticality ignored, nothing shed",
        policy_options={"tenancy": {"bands": False, "shed": False}},
    ),
]
