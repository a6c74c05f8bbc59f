"""QLM's workloads (SoCC'24 §8), scaled to a simulated 2-instance A100 cluster.

Paper: 3,500 ShareGPT requests, Poisson arrivals, classes Interactive (20 s), Batch-1 (60 s),
Batch-2 (1 h) on p99 TTFT; WA = one model (Vicuna-13B); WB = Batch-1 on Mistral-7B and Llama-70B,
Batch-2 on Vicuna-13B and Llama-70B, more models than instances; WC = WB plus "mega prompts" of
3-4K tokens. Here: ShareGPT is not redistributable with the product, so lengths come from the
Azure conversation trace (CC-BY-4.0), whose inputs are longer and outputs shorter. The paper's
absolute rates (0.5K req/s on its cluster) are replaced by the rate at which vllm-fcfs attains
40-60% on this cluster (found with --sweep-rates; the figures are in README.md).
"""

from __future__ import annotations

from shared.domain.engine import EngineConfig
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

GiB = 1 << 30
_CONV = LengthSpec(source="azure-conv", max_input_tokens=4096, max_tokens=2048)
_BASELINES = ["vllm-fcfs", "edf", "oracle", "qlm"]
_PAPER = __doc__ or ""


def _stream(name: str, cls: str, models: list[str], rate: float, **kw: object) -> StreamSpec:
    return StreamSpec.model_validate(
        {"name": name, "slo_class": cls, "models": models, "rate_rps": rate, "lengths": _CONV} | kw
    )


def qlm_wa() -> ScenarioSpec:
    # interactive is half the traffic; the rest is batch work (shares as in QLM's WA mix)
    return ScenarioSpec(
        name="qlm-wa",
        description="one model (Vicuna-13B shape) on 2x A100-80GB, interactive + batch-1/2",
        paper_setup=_PAPER,
        workload=WorkloadSpec(
            streams=[
                _stream("interactive", "interactive", ["llama-2-13b"], 2.25),
                _stream("batch-1", "batch-1", ["llama-2-13b"], 1.35),
                _stream("batch-2", "batch-2", ["llama-2-13b"], 0.9),
            ],
            requests=3500,
        ),
        cluster=ClusterSpec(
            instances=[InstanceSpec(gpu="A100-80GB", models=["llama-2-13b"], count=2)]
        ),
        default_stacks=_BASELINES,
        sweep_rates_rps=[3, 3.5, 4, 4.5, 5, 5.5, 6, 8],
    )


def _wb_streams(rate_b1: float, rate_b2: float) -> list[StreamSpec]:
    return [
        _stream("batch-1", "batch-1", ["mistral-7b", "llama-2-70b"], rate_b1),
        _stream("batch-2", "batch-2", ["llama-2-13b", "llama-2-70b"], rate_b2),
    ]


def _wb_cluster() -> ClusterSpec:
    # every instance may serve every model (swapping). 70B needs 4 A100s to leave KV room for
    # its requests (at TP 2 only ~5K tokens remain), so each instance is a 4-GPU group (2
    # instances = one 8-GPU node); host memory keeps the other models warm
    models = ["mistral-7b", "llama-2-13b", "llama-2-70b"]
    return ClusterSpec(
        instances=[InstanceSpec(gpu="A100-80GB", models=models, tensor_parallel=4, count=2)],
        engine=EngineConfig(host_model_cache_bytes=320 * GiB),
    )


def qlm_wb() -> ScenarioSpec:
    return ScenarioSpec(
        name="qlm-wb",
        description="3 models (7B, 13B, 70B) on 2 instances of 4x A100-80GB, batch only",
        paper_setup=_PAPER,
        workload=WorkloadSpec(streams=_wb_streams(0.5, 0.5), requests=3500),
        cluster=_wb_cluster(),
        default_stacks=_BASELINES,
        sweep_rates_rps=[0.5, 0.75, 1, 1.5, 2, 3],
    )


def qlm_wc() -> ScenarioSpec:
    mega = LengthSpec(
        source="uniform",
        input_min_tokens=3000,
        input_max_tokens=3500,
        output_source="azure-conv",
        max_input_tokens=4096,
        max_tokens=512,
    )
    streams = _wb_streams(0.5, 0.5)
    streams.append(_stream("mega", "batch-1", ["mistral-7b"], 0.1, lengths=mega))
    return ScenarioSpec(
        name="qlm-wc",
        description="qlm-wb plus mega prompts (3-3.5K input tokens) on Mistral-7B",
        paper_setup=_PAPER,
        workload=WorkloadSpec(streams=streams, requests=3500),
        cluster=_wb_cluster(),
        default_stacks=_BASELINES,
        sweep_rates_rps=[0.5, 0.75, 1, 1.5, 2, 3],
    )
