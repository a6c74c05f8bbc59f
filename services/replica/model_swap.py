"""How a replica changes the model its engine serves (the loaders of model_host.py).

- `RestartLoader` (vLLM without sleep mode, e.g. the CPU build): unloading shuts the engine down
  (vLLM's AsyncLLM and its engine core); loading builds a new engine for the other model, vLLM's
  OpenAI application on it, and runs one one-token request (the warm-up), so the first real
  request of the model does not pay for it.
- `SleepWakeLoader` (vLLM with `enable_sleep_mode`, CUDA builds): every model gets its own engine
  at its first load; unloading puts it to sleep (level 1: weights to host memory, KV cache
  dropped) and loading a model seen before wakes its engine up, a copy over PCIe instead of a
  restart.
- `SimulatedLoader` (simulated engine): a new simulated engine for the model after waiting the
  profile's load time (weight_bytes over cold_load_bytes_s, what the simulator charges for a
  swap), with the simulated OpenAI serving on it.

Each is built by `model_loader(args)` from the replica's arguments; the engine kind and
`vllm.enable_sleep_mode` pick it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from services.replica.model_host import ModelHost
from services.replica.openai_serving import OpenAIServing, simulated_serving, vllm_serving
from services.replica.vllm.openai_app import ServingOptions
from shared.domain.engine import EngineStatus


class SwapModelArgs(BaseModel):
    """A further model a replica may swap to (a `swap_models` entry of its arguments)."""

    model_config = ConfigDict(extra="forbid")

    vllm: dict[str, Any] = Field(default_factory=dict)
    """vLLM engine settings of this model over the replica's own `vllm` settings (its
    checkpoint, `model`, at least)."""
    serving: ServingOptions | None = None
    """This model's options of vLLM's OpenAI serving layer; None: the replica's `serving`."""


WARM_UP_PROMPT_IDS = [1, 2, 3, 4]
"""Token ids of the one-token warm-up request a vLLM load runs."""


@dataclass
class Loaded:
    """A model's engine and vLLM's OpenAI application on it."""

    engine: Any
    serving: OpenAIServing


def _status(loaded: Loaded) -> EngineStatus:
    return loaded.serving.status()


async def warm_up(engine: Any, model: str) -> None:
    """One one-token request through a fresh vLLM engine."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, temperature=0.0)
    rid = f"slomesh-warm-up-{model}-{next(_WARM_UPS)}"
    async for _ in engine.llm.generate({"prompt_token_ids": WARM_UP_PROMPT_IDS}, params, rid):
        pass


_WARM_UPS = itertools.count()


class RestartLoader:
    """vLLM: a swap shuts the engine down and starts one for the other model."""

    def __init__(
        self, build_engine: Callable[[str], Any], options: dict[str, ServingOptions]
    ) -> None:
        self.build_engine = build_engine
        """Model -> a new VLLMEngine serving it (blocking: vLLM loads the weights)."""
        self.options = options

    async def build(self, model: str) -> Loaded:
        # vLLM's engine start blocks for seconds: off the event loop, so streams keep their
        # heartbeats and Status keeps answering while the replica swaps
        engine = await asyncio.to_thread(self.build_engine, model)
        serving = await vllm_serving(engine, model, self.options[model])
        await warm_up(engine, model)
        return Loaded(engine, serving)

    async def load(self, model: str) -> Loaded:
        return await self.build(model)

    async def unload(self, model: str, loaded: Loaded) -> None:
        await loaded.engine.shutdown()

    def status(self, loaded: Loaded) -> EngineStatus:
        return _status(loaded)


class SleepWakeLoader(RestartLoader):
    """vLLM with sleep mode: one engine per model, put to sleep and woken instead of restarted."""

    def __init__(
        self, build_engine: Callable[[str], Any], options: dict[str, ServingOptions]
    ) -> None:
        super().__init__(build_engine, options)
        self.engines: dict[str, Loaded] = {}

    async def load(self, model: str) -> Loaded:
        loaded = self.engines.get(model)
        if loaded is None:
            loaded = self.engines[model] = await self.build(model)
        elif await loaded.engine.llm.is_sleeping():
            await loaded.engine.llm.wake_up()
        return loaded

    async def unload(self, model: str, loaded: Loaded) -> None:
        await loaded.engine.llm.sleep(level=1)


class SimulatedLoader:
    """Simulated engine: a swap waits the profile's load time, then a fresh simulated engine."""

    def __init__(
        self,
        build_engine: Callable[[str], Any],
        load_time_s: dict[str, float],
        tokenizer_model: str,
        max_model_len: int,
        options: dict[str, ServingOptions],
    ) -> None:
        self.build_engine = build_engine
        """Model -> a new AsyncSimEngine serving it."""
        self.load_time_s = load_time_s
        self.tokenizer_model = tokenizer_model
        self.max_model_len = max_model_len
        self.options = options
        self.loads = 0

    async def load(self, model: str) -> Loaded:
        if self.loads:  # the replica's first model is there at start, as on a vLLM replica
            await asyncio.sleep(self.load_time_s[model])
        self.loads += 1
        engine = self.build_engine(model)
        serving = await simulated_serving(
            engine, model, self.tokenizer_model, self.max_model_len, self.options[model]
        )
        return Loaded(engine, serving)

    async def unload(self, model: str, loaded: Loaded) -> None:
        await loaded.engine.shutdown()

    def status(self, loaded: Loaded) -> EngineStatus:
        return _status(loaded)


def model_host(
    models: list[str],
    engine_kind: str,
    build_engine: Callable[[str], Any],
    options: dict[str, ServingOptions],
    *,
    sleep_mode: bool = False,
    deadline_ordered: bool = False,
    load_time_s: dict[str, float] | None = None,
    tokenizer_model: str = "",
    max_model_len: int = 0,
) -> ModelHost[Loaded]:
    """The model host of a replica serving `models` (the first active at start);
    `deadline_ordered`: its engine's queue runs the earliest TTFT deadline first (the host's
    line follows it)."""
    loader: Any
    if engine_kind == "vllm":
        loader = (SleepWakeLoader if sleep_mode else RestartLoader)(build_engine, options)
    else:
        times = load_time_s if load_time_s is not None else dict.fromkeys(models, 0.0)
        loader = SimulatedLoader(build_engine, times, tokenizer_model, max_model_len, options)
    return ModelHost(models, loader, deadline_ordered)
