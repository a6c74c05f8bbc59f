"""AdapterSlots: adapters load on demand within the slots, the least recently used one not in
use is unloaded first, an adapter in use is never unloaded (a request for another waits), and
vLLM's refusal is an AdapterLoadError. vLLM's serving-models object is a recording fake here;
the real one is exercised by test_replica_adapters.py and tests/vllm/test_vllm_lora.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from services.replica.adapters import AdapterLoadError, AdapterSlots, ReplicaAdapters
from shared.domain.adapter import AdapterSpec


@dataclass
class FakeModels:
    """vLLM's OpenAIServingModels as AdapterSlots calls it, recording the calls."""

    calls: list[str] = field(default_factory=list)
    lora_requests: dict[str, Any] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)
    removed: list[int] = field(default_factory=list)
    _next_id: int = 0

    async def load_lora_adapter(self, request: Any) -> Any:
        self.calls.append(f"load {request.lora_name}")
        if request.lora_name in self.refuse:
            return SimpleNamespace(error=SimpleNamespace(message="bad adapter"))
        self._next_id += 1
        self.lora_requests[request.lora_name] = SimpleNamespace(lora_int_id=self._next_id)
        return "Success"

    async def unload_lora_adapter(self, request: Any) -> str:
        self.calls.append(f"unload {request.lora_name}")
        del self.lora_requests[request.lora_name]
        return "Success"

    async def remove_lora(self, lora_id: int) -> bool:
        self.removed.append(lora_id)
        return True


def _slots(slots: int, *names: str) -> tuple[AdapterSlots, FakeModels]:
    fake = FakeModels()
    specs = {n: AdapterSpec(name=n, path=f"/adapters/{n}") for n in names}
    return AdapterSlots(specs, slots, fake, fake), fake


def test_loads_on_demand_and_unloads_the_least_recently_used_idle_adapter() -> None:
    async def run() -> tuple[AdapterSlots, FakeModels, list[float]]:
        slots, fake = _slots(2, "a", "b", "c")
        took = []
        for name in ("a", "b", "a", "c"):
            took.append(await slots.acquire(name))
            await slots.release(name)
        return slots, fake, took

    slots, fake, took = asyncio.run(run())
    assert fake.calls[-2:] == ["unload b", "load c"]  # b was the least recently used
    assert slots.names() == ["a", "c"] and slots.unloads == 1
    assert fake.removed == [2]  # the engine's copy of b went too
    assert took[2] == 0.0 and len(slots.load_times_s) == 3


def test_an_adapter_in_use_is_never_unloaded_a_request_for_another_waits() -> None:
    async def run() -> tuple[list[str], list[str]]:
        slots, fake = _slots(1, "a", "b")
        await slots.acquire("a")  # a request runs with a
        waiter = asyncio.create_task(slots.acquire("b"))
        await asyncio.sleep(0.01)
        before = list(fake.calls)
        assert not waiter.done()
        await slots.release("a")
        await waiter
        return before, fake.calls

    before, after = asyncio.run(run())
    assert before == ["load a"]
    assert after == ["load a", "unload a", "load b"]


def test_vllms_refusal_is_a_load_error_and_takes_no_slot() -> None:
    async def run() -> list[str]:
        slots, fake = _slots(1, "a", "bad")
        fake.refuse.add("bad")
        with pytest.raises(AdapterLoadError, match="bad adapter"):
            await slots.acquire("bad")
        assert await slots.acquire("a") == pytest.approx(slots.load_times_s[-1])
        return slots.names()

    assert asyncio.run(run()) == ["a"]


def test_unknown_adapter_is_a_key_error() -> None:
    slots, _ = _slots(1, "a")
    assert not slots.serves("z")
    with pytest.raises(KeyError):
        asyncio.run(slots.acquire("z"))


def test_replica_adapters_config_turns_lora_on_and_checks_ranks() -> None:
    specs = [AdapterSpec(name="a", path="/x", rank=8), AdapterSpec(name="b", path="/y", rank=16)]
    cfg = ReplicaAdapters(specs=specs, slots=2, max_lora_rank=16)
    assert cfg.engine_settings() == {"enable_lora": True, "max_loras": 2, "max_lora_rank": 16}
    assert ReplicaAdapters().engine_settings() == {}
    with pytest.raises(ValueError, match=r"rank 16 > adapters\.max_lora_rank 8"):
        ReplicaAdapters(specs=specs, max_lora_rank=8)
    with pytest.raises(ValueError, match="unique"):
        ReplicaAdapters(specs=[specs[0], specs[0]])
    with pytest.raises(ValueError, match="adapter name"):
        AdapterSpec(name="has space", path="/x")
