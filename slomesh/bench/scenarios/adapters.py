"""`many-adapters`: one base model with four LoRA adapters on two instances (adapter loads).

Many teams serve many fine-tunes of one base model as LoRA adapters: each instance keeps a few
adapters loaded (vLLM's `max_loras`, here 2 slots per engine) and loads another one on demand,
stalling its engine for the load. With four adapters on two instances an adapter-aware placer
can keep each adapter on one instance and never load again; a placer blind to adapters sends
requests of every adapter everywhere and pays loads all the time. Interactive and batch classes
share the adapters (QLM's class names), so affinity has to give way to slack for the
interactive ones when an instance is busy. Lengths come from the Azure conversation trace
(CC-BY-4.0). The simulated load time is a setting of the scenario (0.1 s per load, the order of
a rank-16 adapter of an 8B model read from host memory); the CPU build's figure for the tiny
model is measured by `slomesh profile-adapters` (docs/results/adapters.md). Its model-swap
counterpart, three base models on two instances, is `many-models`.
"""

from __future__ import annotations

from shared.domain.engine import EngineConfig
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

ADAPTERS = ["sql", "poem", "code", "chat"]
"""The four adapters of the base model (requests pick one uniformly)."""
_CONV = LengthSpec(source="azure-conv", max_input_tokens=4096, max_tokens=1024)


def _stream(name: str, cls: str, rate: float) -> StreamSpec:
    return StreamSpec(
        name=name,
        slo_class=cls,
        models=["llama-3.1-8b"],
        adapters=ADAPTERS,
        rate_rps=rate,
        lengths=_CONV,
    )


def many_adapters() -> ScenarioSpec:
    return ScenarioSpec(
        name="many-adapters",
        description="one 8B base model with 4 LoRA adapters on 2x A100-80GB (2 adapter slots "
        "each, 0.1 s per load), interactive + batch-1",
        paper_setup=__doc__ or "",
        workload=WorkloadSpec(
            streams=[
                _stream("interactive", "interactive", 6.0),
                _stream("batch-1", "batch-1", 4.0),
            ],
            requests=2000,
        ),
        cluster=ClusterSpec(
            instances=[InstanceSpec(gpu="A100-80GB", models=["llama-3.1-8b"], count=2)],
            engine=EngineConfig(adapter_slots=2, adapter_load_s=0.1),
        ),
        default_stacks=["vllm-fcfs", "qlm", "slomesh", "slomesh-adapters"],
        sweep_rates_rps=[6, 8, 10, 12, 14, 16, 20],
    )
