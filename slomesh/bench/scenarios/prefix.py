"""`shared-prefix`: shared system prompts and multi-turn conversations.

Llama-3.1-8B on 4x A100-80GB (vLLM-style engines with automatic prefix caching). Two streams:
- `chat` ("chat" class: TTFT 3 s, TPOT 30 ms): multi-turn conversations, 8 system prompts of
  1,000 tokens, 4-16 turns of 50-400-token user messages, each turn re-sending the whole history
  (prompts up to 8,192 tokens); 384 conversations open at once, so a conversation's next turn
  comes ~384/rate s later (26 s at 15 r/s) and the histories (~1.5M tokens) outgrow one
  replica's KV cache (410k tokens) but fit the four;
- `agents` ("relaxed": TTFT 15 s, TPOT 50 ms): single-turn requests behind 4 long tool/agent
  system prompts of 3,000 tokens.
Replies follow the Azure conversation trace's output lengths. Prompts are long and replies
short, so prefill dominates and a turn landing where its history is cached skips most of it.
Conversations need many requests to reach their later turns, so `--capacity` probes run 4,000
requests here (capacity_probe_requests; the usual 1,000 mostly sees early turns). Not a paper
experiment; the peers compared with (Ray Serve LLM, llm-d, SGLang) route on prefix alone.
"""

from __future__ import annotations

from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec
from shared.workloads.conversations import ConversationSpec
from slomesh.bench.scenarios.spec import ScenarioSpec
from slomesh.sim.cluster import ClusterSpec, InstanceSpec

_8B = ["llama-3.1-8b"]
_LENGTHS = LengthSpec(source="azure-conv", max_input_tokens=8192, max_tokens=1024)


def shared_prefix() -> ScenarioSpec:
    chat = StreamSpec(
        name="chat",
        slo_class="chat",
        models=_8B,
        rate_rps=6.0,
        lengths=_LENGTHS,
        conversations=ConversationSpec(
            system_prompts=8,
            system_prompt_tokens=1000,
            turns_min=4,
            turns_max=16,
            user_tokens_min=50,
            user_tokens_max=400,
            concurrent_conversations=384,
        ),
    )
    agents = StreamSpec(
        name="agents",
        slo_class="relaxed",
        models=_8B,
        rate_rps=2.0,
        lengths=_LENGTHS,
        conversations=ConversationSpec(
            system_prompts=4,
            system_prompt_tokens=3000,
            turns_min=1,
            turns_max=1,
            user_tokens_min=100,
            user_tokens_max=500,
            concurrent_conversations=16,
        ),
    )
    return ScenarioSpec(
        name="shared-prefix",
        description=(
            "Llama-3.1-8B on 4x A100-80GB, multi-turn chat re-sending history + agents behind "
            "long shared system prompts"
        ),
        paper_setup=__doc__ or "",
        workload=WorkloadSpec(streams=[chat, agents], requests=4000),
        cluster=ClusterSpec(instances=[InstanceSpec(gpu="A100-80GB", models=_8B, count=4)]),
        default_stacks=["slomesh", "slomesh-no-prefix", "prefix-only", "vllm-fcfs"],
        sweep_rates_rps=[4, 8, 12, 16],
        capacity_probe_requests=4000,
    )
