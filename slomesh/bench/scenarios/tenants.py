"""Many tenants, one cluster: the fairness and band scenarios.

tenants-skew: two tenants on Llama-3.1-8B (1x A100-80GB, Azure conversation lengths, TTFT SLO
20 s), one sending 5x the other's requests of the same length mix (5x the tokens), at 14 req/s:
about 2x the capacity at SLO here (90% attainment, median of seeds 0-2: vllm-fcfs 6.56,
slomesh-no-fairness 7.22, slomesh 6.56 req/s). Measures Jain's index of per-tenant service
against max-min fair shares, each tenant's attainment and total goodput (`slomesh` vs
`slomesh-no-fairness`, `slomesh-queued-no-fairness` and `vllm-fcfs`). The light tenant alone is
the scenario `tenants-light-alone`.
bands-overload: three bands of equal rate (critical, standard, sheddable) at 2x capacity:
critical traffic should keep its attainment while sheddable traffic is shed at once.
"""

from __future__ import annotations

from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

_CONV = LengthSpec(source="azure-conv", max_input_tokens=4096, max_tokens=2048)
_8B = ["llama-3.1-8b"]
_PAPER = (
    "VTC (Sheng et al., OSDI '24) compares FCFS, RPM limits and VTC on two clients, one "
    "sending more than its share, on Llama-2-7B (A10G/A100); here the same skew at 2x the "
    "capacity of one simulated A100 with Azure conversation lengths."
)
_CLUSTER = ClusterSpec(instances=[InstanceSpec(gpu="A100-80GB", models=_8B)])
SKEW_RATE_RPS = 14.0
"""Total rate of tenants-skew and bands-overload: about 2x the capacity at SLO of one A100 here
(`slomesh bench --scenario tenants-skew --capacity --stacks vllm-fcfs,slomesh-no-fairness,slomesh
--seeds 0,1,2`: 6.56 / 7.22 / 6.56 req/s)."""


def _stream(name: str, tenant: str, rate: float, criticality: int = 0) -> StreamSpec:
    return StreamSpec(
        name=name,
        slo_class="interactive",
        models=_8B,
        rate_rps=rate,
        lengths=_CONV,
        tenant=tenant,
        criticality=criticality,
    )


def tenants_skew() -> ScenarioSpec:
    return ScenarioSpec(
        name="tenants-skew",
        description="two tenants, one sending 5x the other's tokens, 2x overload, 1x A100",
        paper_setup=_PAPER,
        workload=WorkloadSpec(
            streams=[
                _stream("heavy", "heavy", SKEW_RATE_RPS * 5 / 6),
                _stream("light", "light", SKEW_RATE_RPS / 6),
            ],
            requests=3000,
        ),
        cluster=_CLUSTER,
        default_stacks=[
            "slomesh",
            "slomesh-no-fairness",
            "slomesh-queued-no-fairness",
            "vllm-fcfs",
        ],
        sweep_rates_rps=[3.5, 7, 10.5, 14, 21],
    )


def tenants_light_alone() -> ScenarioSpec:
    """The light tenant of tenants-skew on its own (its attainment without the heavy one)."""
    return ScenarioSpec(
        name="tenants-light-alone",
        description="the light tenant of tenants-skew alone (2.33 req/s), 1x A100",
        paper_setup=_PAPER,
        workload=WorkloadSpec(streams=[_stream("light", "light", SKEW_RATE_RPS / 6)], requests=500),
        cluster=_CLUSTER,
        default_stacks=["slomesh", "slomesh-no-fairness", "vllm-fcfs"],
    )


def bands_overload() -> ScenarioSpec:
    third = SKEW_RATE_RPS / 3
    return ScenarioSpec(
        name="bands-overload",
        description="critical / standard / sheddable bands at equal rates, 2x overload, 1x A100",
        paper_setup=(
            "Gateway API Inference Extension criticality (Critical, Standard, Sheddable) under "
            "overload; not a paper experiment."
        ),
        workload=WorkloadSpec(
            streams=[
                _stream("critical", "t-critical", third, 1),
                _stream("standard", "t-standard", third, 0),
                _stream("sheddable", "t-sheddable", third, -1),
            ],
            requests=3000,
        ),
        cluster=_CLUSTER,
        default_stacks=["slomesh", "slomesh-no-bands", "vllm-fcfs"],
        sweep_rates_rps=[7, 14, 21],
    )
