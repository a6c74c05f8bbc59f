"""Baselines: vLLM as deployed, EDF, static batching (SLS) and the clairvoyant reference."""

from __future__ import annotations

from slomesh.bench.stacks.base import StackConfig

BASELINE_STACKS: list[StackConfig] = [
    StackConfig(
        name="vllm-fcfs",
        description="vLLM as deployed: round-robin routing, FCFS queue, preempt by recompute",
        policy="round-robin",
    ),
    StackConfig(
        name="edf",
        description="earliest TTFT deadline first, least-loaded routing",
        policy="least-loaded",
        queue_policy="edf",
    ),
    StackConfig(
        name="sls",
        description="static batching (fixed batch size, padding), FCFS, round-robin",
        policy="round-robin",
        engine_mode="static",
    ),
    StackConfig(
        name="prefix-only",
        description=(
            "the peers' prefix-cache affinity: longest cached prefix, ties to the least loaded "
            "(Ray Serve LLM, llm-d, SGLang routers); FCFS vLLM engines"
        ),
        policy="prefix-only",
    ),
    StackConfig(
        name="oracle",
        description="reference: true lengths, earliest-TTFT routing, EDF with eviction and swap",
        policy="oracle-ttft",
        queue_policy="oracle-edf",
        preemption_mode="auto",
    ),
]
