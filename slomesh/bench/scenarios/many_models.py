"""many-models: QLM's multi-model workload (qlm-wb: more models than instances) scaled to this
machine, three tiny base models on two vLLM CPU replicas, interactive and batch classes.

The models are the locally built tiny Llamas (`slomesh build-tiny-model --name all`): one shape,
one tokenizer, three checkpoints. Their step times are the tiny model's measured CPU profile and
their swap time (engine restart + warm-up) is measured by `slomesh profile --engine vllm
--swap-models ...` (deploy/ray/profiles/cpu-tiny-many.json). Each replica may serve every model
and starts on its own (replica 0 on tiny-llama, replica 1 on tiny-llama-b); tiny-llama-c starts
nowhere. As in qlm-wb, each batch class spans two models and one model is shared: batch-1 (QLM's
60 s TTFT) goes to tiny-llama and tiny-llama-b, batch-2 (1 h) to tiny-llama-b and tiny-llama-c;
an interactive class (QLM's 20 s) goes to tiny-llama (rates 2:5:3). Prompts are uniform in
32-256 tokens, outputs from the Azure conversation trace capped at 256 tokens. A swap takes tens
of seconds on this machine (an engine restart): more than the interactive SLO and half the
batch-1 one, so one swap in the way of an interactive request misses it, and a batch-1 request
queued behind two swaps misses too. Arrivals interleave the three models, so a replica that
swaps to whatever it is asked for (an LRU of one model) swaps on nearly every request; a plan
that meets these SLOs keeps tiny-llama and tiny-llama-b where they are and serves
tiny-llama-c's batch-2 requests together, in as few swaps as their 1 h allows. The live form is
`slomesh bench-agree --scenario many-models` on deploy/ray/local-many-models.yaml.
"""

from __future__ import annotations

from shared.domain.engine import EngineConfig
from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

MODELS = ["tiny-llama", "tiny-llama-b", "tiny-llama-c"]
PROFILE_FILE = "cpu-tiny-many.json"
"""Measured profiles of the three models (deploy/ray/profiles)."""
LENGTHS = LengthSpec(
    source="uniform",
    input_min_tokens=32,
    input_max_tokens=256,
    output_source="azure-conv",
    max_input_tokens=256,
    max_tokens=256,
)
STACKS = ["slomesh", "qlm", "serve-multiplex", "vllm-fcfs-static", "vllm-fcfs"]
ENGINE = EngineConfig(max_num_seqs=16, max_num_batched_tokens=2048)
"""The live replicas' vLLM limits (deploy/ray/local-many-models.yaml)."""


def many_models_cluster() -> ClusterSpec:
    rotate = [MODELS, [MODELS[1], MODELS[2], MODELS[0]]]  # each replica starts on its own model
    return ClusterSpec(
        instances=[InstanceSpec(gpu="cpu", models=m, profile_file=PROFILE_FILE) for m in rotate],
        engine=ENGINE,
    )


def many_models() -> ScenarioSpec:
    streams = [
        StreamSpec(name=name, slo_class=cls, models=models, rate_rps=rate, lengths=LENGTHS)
        for name, cls, models, rate in (
            ("interactive", "interactive", MODELS[:1], 2.0),
            ("batch-1", "batch-1", MODELS[:2], 5.0),
            ("batch-2", "batch-2", MODELS[1:], 3.0),
        )
    ]
    return ScenarioSpec(
        name="many-models",
        description="3 tiny models on 2 vLLM CPU replicas (swaps), interactive + qlm-wb's batch",
        paper_setup=__doc__ or "",
        workload=WorkloadSpec(streams=streams, requests=1500),
        cluster=many_models_cluster(),
        default_stacks=STACKS,
        sweep_rates_rps=[0.5, 1, 2, 4, 8],
    )
