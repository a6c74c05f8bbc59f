"""`SimulatedAsyncLLM`: vLLM's `AsyncLLM` front end over the simulated engine.

A simulated replica serves the API users see: vLLM's OpenAI serving classes (vllm/openai_app.py)
on vLLM's own `AsyncLLM` front half (renderer, input processor, detokenizing output processor,
stop strings, `n` fan-out), whose engine core is a test double, `SimulatedEngineCore`: the
simulated engine (`AsyncSimEngine`, profiled step times on the wall clock) in place of vLLM's
engine-core process. It implements the engine-core client calls AsyncLLM makes (add, abort,
outputs, supported tasks, health, shutdown). Requests are validated, rendered and answered
exactly as on a vLLM replica; only the tokens are synthetic (deterministic ids from the
model's vocabulary, the length the simulated engine plays; logprobs, when asked for, are a
fixed made-up distribution) and grammars are not enforced on them.

The model directory gives the tokenizer, chat template and config (`slomesh build-tiny-model`
builds one locally); the served name and context length are the simulated model's.
"""

from __future__ import annotations

import asyncio
import zlib
from dataclasses import replace
from typing import Any

from services.replica.engine import EngineRequest
from services.replica.sim_engine import AsyncSimEngine
from shared.domain import SLO, Request


class SimulatedEngineCore:
    """The engine-core client calls of vLLM's AsyncLLM, answered by an `AsyncSimEngine`."""

    def __init__(
        self,
        engine: AsyncSimEngine,
        model: str,
        vocab_ids: list[int],
        eos_id: int,
        adapter_load_s: float = 0.0,
    ):
        self.engine = engine
        self.model = model
        self.vocab_ids = vocab_ids
        self.eos_id = eos_id
        self.outputs: asyncio.Queue[Any] = asyncio.Queue()
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.engine_ranks_managed = [0]
        self.resources = _Resources()
        self.requests: dict[str, Request] = {}
        """slomesh's view of requests the replica is serving, by slomesh id (set by the
        replica before it calls the app; the core's requests are built from them)."""
        self.engine_ids: dict[str, list[str]] = {}
        """The engine's request ids (vLLM's, one per choice) of each slomesh id."""
        self.adapter_load_s = adapter_load_s
        """Seconds an adapter load takes (vLLM loads it between engine steps)."""
        self.loras: set[int] = set()
        """The adapters loaded in the engine (vLLM's lora_int_id)."""

    # ---- QLM's eviction on the simulated engine: the requests pause, their streams wait -------
    async def evict(self, request_ids: list[str]) -> list[str]:
        return self._by_slomesh(request_ids, await self.engine.evict(self._ids(request_ids)))

    async def resume(self, request_ids: list[str]) -> list[str]:
        return self._by_slomesh(request_ids, await self.engine.resume(self._ids(request_ids)))

    def _ids(self, request_ids: list[str]) -> list[str]:
        return [e for rid in request_ids for e in self.engine_ids.get(rid, ())]

    def _by_slomesh(self, request_ids: list[str], done: list[str]) -> list[str]:
        hit = set(done)
        return [r for r in request_ids if any(e in hit for e in self.engine_ids.get(r, ()))]

    # ---- what AsyncLLM calls -----------------------------------------------------------------
    async def add_request_async(self, request: Any) -> None:
        sim = self._sim_request(request)
        task = asyncio.get_running_loop().create_task(self._play(request, sim))
        self.tasks[request.request_id] = task

    async def abort_requests_async(self, request_ids: list[str]) -> None:
        for rid in request_ids:
            task = self.tasks.pop(rid, None)
            if task is not None:
                task.cancel()

    async def add_lora_async(self, lora_request: Any) -> bool:
        """Load an adapter: vLLM's engine reads and validates its files, then holds it."""
        from vllm.lora.peft_helper import PEFTHelper

        PEFTHelper.from_local_dir(lora_request.lora_path, None)  # a missing adapter fails here
        await asyncio.sleep(self.adapter_load_s)
        self.loras.add(lora_request.lora_int_id)
        return True

    async def remove_lora_async(self, lora_id: int) -> bool:
        had = lora_id in self.loras
        self.loras.discard(lora_id)
        return had

    async def list_loras_async(self) -> set[int]:
        return set(self.loras)

    async def pin_lora_async(self, lora_id: int) -> bool:
        return lora_id in self.loras

    async def get_output_async(self) -> Any:
        return await self.outputs.get()

    async def get_supported_tasks_async(self) -> tuple[str, ...]:
        return ("generate",)

    async def reset_mm_cache_async(self) -> None:
        return None

    async def reset_prefix_cache_async(self, *args: Any, **kwargs: Any) -> bool:
        return True

    async def is_sleeping_async(self) -> bool:
        return False

    async def is_scheduler_paused_async(self) -> bool:
        return False

    def dp_engines_running(self) -> bool:
        return bool(self.tasks)

    def get_kv_event_sources(self) -> dict[int, Any]:
        return {}

    def shutdown(self, timeout: float | None = None) -> None:
        for task in self.tasks.values():
            task.cancel()
        self.tasks.clear()

    # ---- internals ---------------------------------------------------------------------------
    def _sim_request(self, request: Any) -> Request:
        """The simulated engine's request for vLLM's EngineCoreRequest `request`."""
        params = request.sampling_params
        extra = (params.extra_args or {}).get("slomesh") or {}
        slomesh_id = str(extra.get("request_id", ""))
        base = self.requests.get(slomesh_id)
        if base is not None:
            self.engine_ids.setdefault(slomesh_id, []).append(request.request_id)
        prompt_tokens = max(1, len(request.prompt_token_ids or ()))
        max_tokens = int(params.max_tokens or 1)
        forced = max_tokens if params.ignore_eos else extra.get("simulated_output_tokens")
        true_out = min(int(forced), max_tokens) if forced else None
        if base is None:
            base = Request(
                request_id=request.request_id,
                model=self.model,
                arrival_s=self.engine.clock.now(),
                input_tokens=prompt_tokens,
                max_tokens=max_tokens,
                slo=SLO(ttft_deadline_s=3600.0),
            )
        return replace(
            base,
            request_id=request.request_id,
            input_tokens=prompt_tokens,
            max_tokens=max_tokens,
            true_output_tokens=true_out,
        )

    async def _play(self, request: Any, sim: Request) -> None:
        from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs, FinishReason

        params = request.sampling_params
        want = params.logprobs
        rid = request.request_id
        seed = zlib.crc32(rid.encode())
        try:
            async for chunk in self.engine.generate(EngineRequest(sim)):
                n_new = len(chunk.token_ids)
                start = chunk.num_output_tokens - n_new
                ids = [
                    self.vocab_ids[(seed + start + i) % len(self.vocab_ids)] for i in range(n_new)
                ]
                reason = None
                if chunk.finished:
                    if chunk.finish_reason == "stop" and ids and not params.ignore_eos:
                        ids[-1] = self.eos_id
                    reason = {
                        "stop": FinishReason.STOP,
                        "length": FinishReason.LENGTH,
                    }.get(chunk.finish_reason or "", FinishReason.ABORT)
                out = EngineCoreOutput(
                    request_id=rid,
                    new_token_ids=ids,
                    new_logprobs=_logprobs(ids, want, self.vocab_ids) if want is not None else None,
                    finish_reason=reason,
                )
                self.outputs.put_nowait(EngineCoreOutputs(outputs=[out]))
        finally:
            self.tasks.pop(rid, None)
            extra = (params.extra_args or {}).get("slomesh") or {}
            mine = self.engine_ids.get(str(extra.get("request_id", "")))
            if mine is not None and rid in mine:
                mine.remove(rid)
                if not mine:
                    self.engine_ids.pop(str(extra.get("request_id", "")), None)


class _Resources:
    engine_dead = False


def _logprobs(ids: list[int], k: int, vocab: list[int]) -> Any:
    """A fixed made-up distribution: the sampled token first at log(1/2), k others after it."""
    import numpy as np
    from vllm.v1.outputs import LogprobsLists

    k = max(0, k if k >= 0 else 0)
    rows = [[t] + [vocab[(t + j + 1) % len(vocab)] for j in range(k)] for t in ids]
    lps = [[-0.6931472] + [-2.0 - j for j in range(k)] for _ in ids]
    return LogprobsLists(
        np.array(rows, dtype=np.int64).reshape(len(ids), k + 1),
        np.array(lps, dtype=np.float32).reshape(len(ids), k + 1),
        np.zeros(len(ids), dtype=np.int64),
    )


def word_ids(tokenizer: Any, most: int = 50000) -> list[int]:
    """Token ids the synthetic output draws from: those that decode to letters (no special,
    byte-fallback or punctuation tokens, so every choice has visible text and random stop
    strings rarely fire)."""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = []
    for i in range(min(len(tokenizer), most)):
        if i in special:
            continue
        text = tokenizer.decode([i]).strip()
        if text.isalpha():
            ids.append(i)
    return ids or [i for i in range(min(len(tokenizer), most)) if i not in special]


def simulated_llm(
    vllm_config: Any, engine: AsyncSimEngine, model: str, adapter_load_s: float = 0.0
) -> Any:
    """vLLM's AsyncLLM front end (built as AsyncLLM builds it) over a SimulatedEngineCore."""
    from vllm.renderers import renderer_from_config
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.input_processor import InputProcessor
    from vllm.v1.engine.output_processor import OutputProcessor

    llm = AsyncLLM.__new__(AsyncLLM)
    llm.vllm_config = vllm_config
    llm.model_config = vllm_config.model_config
    llm.scheduler_config = vllm_config.scheduler_config
    llm.observability_config = vllm_config.observability_config
    llm.log_requests = False
    llm.log_stats = False
    llm.renderer = renderer = renderer_from_config(vllm_config)
    llm.input_processor = InputProcessor(vllm_config, renderer)
    llm.admission_stats = None
    llm.output_processor = OutputProcessor(
        renderer.tokenizer,
        log_stats=False,
        stream_interval=vllm_config.scheduler_config.stream_interval,
        tracing_enabled=False,
        admission_stats=None,
    )
    tokenizer = renderer.tokenizer
    llm.engine_core = SimulatedEngineCore(
        engine, model, word_ids(tokenizer), tokenizer.eos_token_id, adapter_load_s
    )
    llm.logger_manager = None
    llm._client_count = 1
    llm._elastic_ep_lock = asyncio.Lock()
    llm.output_handler = None
    llm.profiler = None
    llm._frontend_profiler_injected = False
    llm._profile_lock = asyncio.Lock()
    llm._profile_session_guard_enabled = True
    llm._profile_session_active = False
    llm._run_output_handler()  # type: ignore[no-untyped-call]
    return llm
