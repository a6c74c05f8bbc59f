"""The simulated engine's LoRA adapters: a request whose adapter the engine does not hold makes
it load the adapter (the next step takes config.adapter_load_s longer), within
config.adapter_slots, the least recently used unloaded first; a held adapter costs nothing."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.replica.conftest import make_core, make_request


def _step_s(core, now: float) -> float:
    plan = core.schedule(now)
    core.update(plan)
    return plan.duration_s


@pytest.mark.parametrize(
    ("adapters", "slots", "loads", "held"),
    [
        (["a", "a", "a"], 1, 1, ["a"]),  # one load, then the adapter is held
        (["a", "b", "a"], 1, 3, ["a"]),  # one slot: every change of adapter loads
        (["a", "b", "a"], 2, 2, ["b", "a"]),  # two slots: a is still held, b least recent
        ([None, None], 1, 0, []),  # the base model needs no adapter
    ],
)
def test_adapter_loads_within_the_slots(adapters, slots, loads, held) -> None:
    core = make_core(adapter_slots=slots, adapter_load_s=0.5)
    for k, adapter in enumerate(adapters):
        req = dataclasses.replace(make_request(f"r{k}", 16, 2), adapter=adapter)
        core.add_request(req, 0.0)
    assert core.adapter_loads == loads and list(core.adapters) == held


def test_a_load_stalls_the_next_step_only() -> None:
    plain, lora = make_core(), make_core(adapter_load_s=0.5)
    for core, adapter in ((plain, None), (lora, "a")):
        core.add_request(dataclasses.replace(make_request("r", 16, 4), adapter=adapter), 0.0)
    first = _step_s(lora, 0.0) - _step_s(plain, 0.0)
    second = _step_s(lora, 1.0) - _step_s(plain, 1.0)
    assert first == pytest.approx(0.5) and second == pytest.approx(0.0)
    lora.load_adapter("a")  # held already (the scheduler's planned load): no stall
    assert _step_s(lora, 2.0) == pytest.approx(_step_s(plain, 2.0))
