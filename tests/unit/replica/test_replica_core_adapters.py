"""The simulated engine's LoRA adapters, after vLLM's max_loras rule: a batch runs at most
config.adapter_slots distinct adapters (a waiting request whose adapter would be one too many
is skipped, and those behind it may still run); an adapter the engine does not hold loads when
a request first runs with it (that step takes config.adapter_load_s longer), the least
recently used unloaded beyond the slots; a held adapter costs nothing."""

from __future__ import annotations

import dataclasses

import pytest

from tests.unit.replica.conftest import make_core, make_request


def _step_s(core, now: float) -> float:
    plan = core.schedule(now)
    core.update(plan)
    return plan.duration_s


def _run(core, adapters: list[str | None]) -> list[list[str]]:
    """Add one 2-token request per adapter at t=0 and step until done: each step's requests."""
    for k, adapter in enumerate(adapters):
        req = dataclasses.replace(make_request(f"r{k}", 16, 2), adapter=adapter)
        core.add_request(req, 0.0)
    steps, now = [], 0.0
    while core.has_work and len(steps) < 100:
        plan = core.schedule(now)
        steps.append([ch.seq.request.request_id for ch in plan.chunks])
        core.update(plan)
        now = plan.end_s
    return steps


@pytest.mark.parametrize(
    ("adapters", "slots", "first_step", "loads", "held"),
    [
        (["a", "a", "a"], 1, ["r0", "r1", "r2"], 1, ["a"]),  # one load, then the adapter is held
        # one slot: b waits for a batch without a; the a behind it runs at once
        (["a", "b", "a"], 1, ["r0", "r2"], 2, ["b"]),
        (["a", "b", "a"], 2, ["r0", "r1", "r2"], 2, ["a", "b"]),  # two slots: one batch
        (["a", "b", "c", None], 2, ["r0", "r1", "r3"], 3, ["b", "c"]),  # the base needs none
        ([None, None], 1, ["r0", "r1"], 0, []),
    ],
)
def test_a_batch_runs_at_most_the_slots_in_adapters(adapters, slots, first_step, loads, held):
    core = make_core(adapter_slots=slots, adapter_load_s=0.5)
    steps = _run(core, adapters)
    assert steps[0] == first_step
    by_id = {f"r{k}": a for k, a in enumerate(adapters)}
    for step in steps:
        assert len({by_id[r] for r in step} - {None}) <= slots
    assert core.adapter_loads == loads and list(core.adapters) == held
    assert core.status().loaded_adapters == tuple(held)  # what the scheduler reads


def test_skipped_requests_keep_their_place_in_the_queue():
    core = make_core(adapter_slots=1)
    steps = _run(core, ["a", "b", "c", "b"])
    assert not core.has_work and len(steps) < 100  # every request ran
    first = [r for step in steps for r in step]
    assert list(dict.fromkeys(first)) == ["r0", "r1", "r3", "r2"]  # b's pair before c
    assert core.adapter_loads == 3


def test_a_load_stalls_its_step_only() -> None:
    plain, lora = make_core(), make_core(adapter_load_s=0.5)
    for core, adapter in ((plain, None), (lora, "a")):
        core.add_request(dataclasses.replace(make_request("r", 16, 4), adapter=adapter), 0.0)
    first = _step_s(lora, 0.0) - _step_s(plain, 0.0)
    second = _step_s(lora, 1.0) - _step_s(plain, 1.0)
    assert first == pytest.approx(0.5) and second == pytest.approx(0.0)
    lora.load_adapter("a")  # held already (the scheduler's planned load): no stall
    assert _step_s(lora, 2.0) == pytest.approx(_step_s(plain, 2.0))
