"""many-models: QLM's multi-model workload (qlm-wb: more models than instances) scaled to this
machine, three tiny base models on two vLLM CPU replicas, interactive and batch classes.

The models are the locally built tiny Llamas (`slomesh build-tiny-model --name all`): one shape,
one tokenizer, three checkpoints. Their step times are the tiny model's measured CPU profile and
their swap time (engine restart + warm-up) is measured by `slomesh profile --engine vllm
--swap-models ...` (deploy/ray/profiles/cpu-tiny-many.json). Each replica may serve every model
and starts on its own (replica 0 on tiny-llama, replica 1 on tiny-llama-b); tiny-llama-c starts
nowhere. As in qlm-wb, each batch class spans two models and one model is shared: batch-1 (QLM's
60 s TTFT) goes to tiny-llama and tiny-llama-b, batch-2 to tiny-llama-b and tiny-llama-c; an
interactive class (QLM's 20 s) goes to tiny-llama (rates 2:5:3). Prompts are uniform in
32-256 tokens, outputs from the Azure conversation trace capped at 256 tokens.

batch-2's deadline is scaled with the swap, as QLM's workloads relate them: QLM's 1 h is
hundreds of its GPU swaps, and its runs (3,500 requests at its rates) last about as long as
that deadline, so the batch-2 model's requests keep arriving while earlier ones fall due. Here a
swap takes tens of seconds (an engine restart) and the tiny model serves tens of requests per
second, so with 1 h a whole run arrives long before its first batch-2 request is due, one swap
after the last arrival serves all of them, and a capacity search finds no rate it cannot absorb.
With `BATCH_2_TTFT_S` (5 min: ten swaps, five times batch-1's) arrivals outlast the deadline in
runs of a few minutes: the third model has to be served between swaps while the other two keep
arriving. Capacity probes last at least `PROBE_DEADLINES` batch-2 deadlines at every rate
(ScenarioSpec.capacity_probe_deadlines), so that a probe at a high rate cannot arrive entirely
within one deadline and measure only the burst a stack absorbs.

A swap is longer than the interactive SLO and half the batch-1 one, so one swap in the way of
an interactive request misses it, and a batch-1 request queued behind two swaps misses too.
Arrivals interleave the three models, so a replica that swaps to whatever it is asked for (an
LRU of one model) swaps on nearly every request; a plan that meets these SLOs keeps tiny-llama
in place and serves tiny-llama-c's batch-2 requests together, one swap there and one back per
batch-2 deadline. Live, `slomesh up --config deploy/ray/local-many-models.yaml` serves it with
the same classes.
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
BATCH_2_TTFT_S = 300.0
"""batch-2's TTFT deadline here, seconds (QLM's 1 h scaled to this machine's swaps)."""
PROBE_DEADLINES = 2.0
"""A capacity probe's arrivals last at least this many times BATCH_2_TTFT_S, at every rate."""
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
        StreamSpec(
            name=name,
            slo_class=cls,
            ttft_deadline_s=ttft_s,
            models=models,
            rate_rps=rate,
            lengths=LENGTHS,
        )
        for name, cls, ttft_s, models, rate in (
            ("interactive", "interactive", None, MODELS[:1], 2.0),
            ("batch-1", "batch-1", None, MODELS[:2], 5.0),
            ("batch-2", "batch-2", BATCH_2_TTFT_S, MODELS[1:], 3.0),
        )
    ]
    return ScenarioSpec(
        name="many-models",
        description="3 tiny models on 2 vLLM CPU replicas (swaps), interactive + qlm-wb's batch "
        "(batch-2 5 min)",
        paper_setup=__doc__ or "",
        workload=WorkloadSpec(streams=streams, requests=1500),
        cluster=many_models_cluster(),
        default_stacks=STACKS,
        sweep_rates_rps=[0.5, 1, 2, 4, 8],
        capacity_probe_deadlines=PROBE_DEADLINES,
    )
