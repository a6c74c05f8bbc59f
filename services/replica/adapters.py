"""LoRA adapters loaded on one replica, at most `slots` at a time (`AdapterSlots`).

Adapters load and unload through vLLM's own runtime mechanism: the OpenAI application's
`OpenAIServingModels.load_lora_adapter` (what `POST /v1/load_lora_adapter` runs: it validates
the adapter and has the engine load it, `AsyncLLM.add_lora`) and `unload_lora_adapter` plus
`AsyncLLM.remove_lora` (the registry entry and the engine's copy). Once loaded, an adapter is a
model vLLM's application serves: a request naming it in `model` runs with its weights and
`/v1/models` lists it. On a simulated replica the same calls reach the simulated engine core,
which plays the load time (sim_llm.py).

A request for an adapter not loaded here loads it first, unloading the least recently used
adapter that no request is using when the slots are full (waiting until one is free when all
are in use). The slots are vLLM's `max_loras`: an engine step can run at most that many
adapters, so keeping more registered would only queue requests inside vLLM. Each load's
duration is kept (`load_times_s`) for the profile and the report.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.domain.adapter import AdapterSpec


class ReplicaAdapters(BaseModel):
    """The LoRA adapters a replica serves over its base model (`ReplicaArgs.adapters`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    specs: list[AdapterSpec] = Field(default_factory=list)
    """Adapters this replica may load (none: the base model only, LoRA off in the engine)."""
    slots: int = Field(1, ge=1)
    """Adapters loaded at once at most: vLLM's `max_loras` (unless `vllm` sets it), the
    simulated engine's slots alike."""
    max_lora_rank: int = Field(16, ge=1)
    """vLLM's `max_lora_rank` (one of 1, 8, 16, 32, 64, 128, 256, 320, 512), at least every
    adapter's rank."""
    simulated_load_s: float = Field(0.05, ge=0)
    """Simulated engine: seconds one adapter load takes (`slomesh profile --adapters` measures
    it on vLLM)."""

    @model_validator(mode="after")
    def _ranks_fit(self) -> ReplicaAdapters:
        for spec in self.specs:
            if spec.rank > self.max_lora_rank:
                raise ValueError(
                    f"adapters.specs: adapter {spec.name!r} has rank {spec.rank} > "
                    f"adapters.max_lora_rank {self.max_lora_rank}"
                )
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError("adapters.specs: adapter names must be unique")
        return self

    def engine_settings(self) -> dict[str, Any]:
        """VLLMEngineConfig fields that turn LoRA on for these adapters ({} without any)."""
        if not self.specs:
            return {}
        return {"enable_lora": True, "max_loras": self.slots, "max_lora_rank": self.max_lora_rank}


class AdapterLoadError(RuntimeError):
    """vLLM refused to load an adapter (its message says why)."""


@dataclass
class AdapterSlots:
    """The adapters of one replica, loaded on demand in `slots` slots, LRU-unloaded."""

    specs: Mapping[str, AdapterSpec]
    """Adapters this replica may load, by name."""
    slots: int
    """Adapters loaded at once at most (the engine's max_loras)."""
    models: Any
    """vLLM's OpenAIServingModels of the replica's application."""
    llm: Any
    """The engine client (`remove_lora`)."""
    clock: Callable[[], float] = time.perf_counter
    loaded: OrderedDict[str, int] = field(default_factory=OrderedDict)
    """Loaded adapters, least recently used first -> vLLM's lora_int_id."""
    in_use: dict[str, int] = field(default_factory=dict)
    """Requests running with each adapter (an adapter in use is never unloaded)."""
    load_times_s: list[float] = field(default_factory=list)
    """Seconds each load took, in order."""
    unloads: int = 0
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ValueError(f"slots must be >= 1, got {self.slots}")

    def serves(self, name: str) -> bool:
        """Whether `name` is one of this replica's adapters."""
        return name in self.specs

    def names(self) -> list[str]:
        """The loaded adapters, least recently used first."""
        return list(self.loaded)

    async def acquire(self, name: str) -> float:
        """Make `name` loaded and count one request using it until `release`; the seconds
        spent loading it (0 when it was loaded already). Raises KeyError for an adapter this
        replica does not have, AdapterLoadError when vLLM refuses it."""
        spec = self.specs[name]
        if name in self.loaded:  # no await before the count: nothing can unload it meanwhile
            self._take(name)
            return 0.0
        async with self._changed:
            while name not in self.loaded:
                if len(self.loaded) < self.slots:
                    took = await self._load(spec)
                    self._take(name)
                    return took
                victim = next((a for a in self.loaded if not self.in_use.get(a)), None)
                if victim is None:
                    await self._changed.wait()
                    continue
                await self._unload(victim)
            self._take(name)
            return 0.0

    async def release(self, name: str) -> None:
        """One request using `name` is done."""
        left = self.in_use.get(name, 0) - 1
        if left > 0:
            self.in_use[name] = left
            return
        self.in_use.pop(name, None)
        async with self._changed:
            self._changed.notify_all()

    def _take(self, name: str) -> None:
        self.loaded.move_to_end(name)
        self.in_use[name] = self.in_use.get(name, 0) + 1

    async def _load(self, spec: AdapterSpec) -> float:
        from vllm.entrypoints.serve.lora.protocol import LoadLoRAAdapterRequest

        start = self.clock()
        result = await self.models.load_lora_adapter(
            LoadLoRAAdapterRequest(lora_name=spec.name, lora_path=spec.local_path)
        )
        if not isinstance(result, str):  # vLLM's ErrorResponse
            raise AdapterLoadError(f"adapter {spec.name!r}: {result.error.message}")
        took = self.clock() - start
        self.load_times_s.append(took)
        self.loaded[spec.name] = self.models.lora_requests[spec.name].lora_int_id
        return took

    async def _unload(self, name: str) -> None:
        from vllm.entrypoints.serve.lora.protocol import UnloadLoRAAdapterRequest

        lora_id = self.loaded.pop(name)
        await self.models.unload_lora_adapter(UnloadLoRAAdapterRequest(lora_name=name))
        await self.llm.remove_lora(lora_id)
        self.unloads += 1
