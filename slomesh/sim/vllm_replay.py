"""Replay a trace on real vLLM (AsyncLLM, CPU build); per-request TTFT, TPOT and E2E, wall clock.

The shell counterpart of slomesh/sim/replay.py. vLLM's AsyncLLM is driven directly (not through
VLLMEngine) so each request gets exactly the parameters a fidelity run needs: a token-id prompt of
exactly input_tokens ids (seeded random ids, never the special tokens), max_tokens =
output_tokens with ignore_eos, greedy sampling. Prefix caching is off (the simulated engine has
none), so repeated replays of the same prompts cost the same. A few warm-up requests run before
the trace so the first trace request does not pay start-up costs. The engine core runs with one
torch thread by default (OMP_NUM_THREADS=1, as the profiler measures it; see `replay_vllm`).

Each request is submitted at start + arrival_s (asyncio sleep on the wall clock); its latencies are
measured from that scheduled time to the first output token and to the final output, so client
lag (the loop busy with vLLM's output processing) counts as latency. `max_lateness_s` reports it.

Scripts that call `replay_vllm` need an `if __name__ == "__main__":` guard: vLLM spawns its
engine-core process, which re-imports the main module.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from services.replica.vllm.config import VLLMEngineConfig
from slomesh.sim.replay import RequestTiming
from slomesh.sim.trace import TraceRequest

if TYPE_CHECKING:
    from vllm.v1.engine.async_llm import AsyncLLM

FIRST_TOKEN_ID = 3
"""Prompt ids start here: the tiny model's ids 0-2 are its special tokens."""


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """The limits vLLM resolved (the simulated engine mirrors them)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size_tokens: int
    kv_blocks: int


@dataclass(frozen=True, slots=True)
class VLLMReplay:
    """runs[k]: the timings of the k-th replay of the trace on the same engine (trace order)."""

    runs: list[list[RequestTiming]]
    limits: EngineLimits
    max_lateness_s: float
    wall_s: list[float]
    start_s: list[float]
    """perf_counter() at each run's time 0 (a request is due at start + arrival_s)."""
    id_prefixes: list[str]
    """vLLM request id of trace request r in run k: id_prefixes[k] + r.request_id."""

    @property
    def timings(self) -> list[RequestTiming]:
        return self.runs[0]


def prompt_ids(index: int, length: int, vocab_size: int, seed: int) -> list[int]:
    """Seeded random prompt token ids of request `index` (never a special token)."""
    rng = np.random.default_rng([seed, index])
    return [int(x) for x in rng.integers(FIRST_TOKEN_ID, vocab_size, size=length)]


def replay_vllm(
    trace: Sequence[TraceRequest],
    config: VLLMEngineConfig,
    *,
    seed: int = 0,
    warmup_requests: int = 4,
    torch_threads: int | None = 1,
    repeats: int = 1,
    step_log: Path | None = None,
) -> VLLMReplay:
    """Start vLLM with `config` (prefix caching forced off), warm it up, replay `trace`
    `repeats` times, one replay after the other (same prompts; a fresh request-id prefix each).

    torch_threads sets OMP_NUM_THREADS for vLLM's engine-core process (None: vLLM's default,
    which on the CPU build keeps one spinning OpenMP thread per core; on a shared machine those
    stall whenever another process takes a core, so step times turn bimodal).

    step_log: when set, vLLM runs its stock scheduler with a stopwatch
    (services/replica/vllm/step_recorder.py) and the engine core appends its step timings,
    request arrivals and first-token times to this file (warm-up requests included).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if step_log is not None and config.uses_scheduler_hook:
        raise ValueError("step_log needs the stock FCFS scheduler (queue_policy fcfs, no scorpio)")
    return asyncio.run(
        _main(trace, config, seed, warmup_requests, torch_threads, repeats, step_log)
    )


async def _main(
    trace: Sequence[TraceRequest],
    config: VLLMEngineConfig,
    seed: int,
    warmup: int,
    torch_threads: int | None,
    repeats: int,
    step_log: Path | None,
) -> VLLMReplay:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if config.multiprocessing else "0"
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext
    from vllm.v1.engine.async_llm import AsyncLLM

    cfg = config.model_copy(update={"enable_prefix_caching": False})
    kwargs = cfg.engine_args_kwargs()
    env = {}
    if torch_threads is not None:  # read by the engine-core process vLLM starts now
        env["OMP_NUM_THREADS"] = str(torch_threads)
    if step_log is not None:
        from services.replica.vllm import step_recorder

        kwargs["scheduler_cls"] = f"{step_recorder.__name__}.StepRecordingScheduler"
        env[step_recorder.ENV_VAR] = str(step_log)
        step_log.parent.mkdir(parents=True, exist_ok=True)
        step_log.write_text("")
    args = AsyncEngineArgs(**kwargs, disable_log_stats=True)
    vllm_config = args.create_engine_config(UsageContext.ENGINE_CONTEXT)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        llm = AsyncLLM.from_vllm_config(vllm_config, disable_log_stats=True)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    try:
        limits = EngineLimits(
            max_num_seqs=int(vllm_config.scheduler_config.max_num_seqs),
            max_num_batched_tokens=int(vllm_config.scheduler_config.max_num_batched_tokens),
            block_size_tokens=int(vllm_config.cache_config.block_size),
            kv_blocks=int(vllm_config.cache_config.num_gpu_blocks or 0),
        )
        vocab = int(vllm_config.model_config.get_vocab_size())
        longest = max((t.input_tokens for t in trace), default=16)
        warm = [TraceRequest(f"w{i}", 0.0, min(longest, 64 << i), 8) for i in range(warmup)]
        await _replay(llm, warm, vocab, seed + 1, "warmup-", time.perf_counter())
        runs, walls, starts, lateness = [], [], [], 0.0
        prefixes = [f"run{k}-" if k else "" for k in range(repeats)]
        for k in range(repeats):
            start = time.perf_counter()
            timings, late = await _replay(llm, trace, vocab, seed, prefixes[k], start)
            walls.append(time.perf_counter() - start)
            starts.append(start)
            runs.append(timings)
            lateness = max(lateness, late)
    finally:
        llm.shutdown()
        # drop the reference: a frame that outlives this call (vLLM keeps one alive) must not
        # hold the engine, or its __del__ runs again at interpreter exit and fails there
        del llm
    return VLLMReplay(runs, limits, lateness, walls, starts, prefixes)


async def _replay(
    llm: AsyncLLM,
    trace: Sequence[TraceRequest],
    vocab: int,
    seed: int,
    prefix: str,
    start: float,
) -> tuple[list[RequestTiming], float]:
    runs = [
        _one(llm, t, prompt_ids(i, t.input_tokens, vocab, seed), start, prefix)
        for i, t in enumerate(trace)
    ]
    results = await asyncio.gather(*runs)
    return [r for r, _ in results], max((late for _, late in results), default=0.0)


async def _one(
    llm: AsyncLLM, t: TraceRequest, ids: list[int], start: float, prefix: str
) -> tuple[RequestTiming, float]:
    from vllm.sampling_params import RequestOutputKind, SamplingParams

    params = SamplingParams(
        max_tokens=t.output_tokens,
        ignore_eos=True,
        temperature=0.0,
        output_kind=RequestOutputKind.DELTA,
    )
    due = start + t.arrival_s
    await asyncio.sleep(max(0.0, due - time.perf_counter()))
    lateness = time.perf_counter() - due
    first: float | None = None
    finish: float | None = None
    tokens = 0
    prompt: Any = {"prompt_token_ids": ids}
    async for out in llm.generate(prompt, params, f"{prefix}{t.request_id}"):
        now = time.perf_counter()
        new = len(out.outputs[0].token_ids) if out.outputs else 0
        if new and first is None:
            first = now
        tokens += new
        if out.finished:
            finish = now
    if first is None or finish is None:
        raise RuntimeError(f"vLLM finished {t.request_id} without output")
    timing = RequestTiming(
        t.request_id, t.arrival_s, t.input_tokens, tokens, first - due, finish - due
    )
    return timing, lateness
