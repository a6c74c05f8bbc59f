"""Streams with LoRA adapters: each request picks one of the stream's adapters, the same ones for
the same seed, and a stream without adapters draws exactly what it drew before (the adapter
draw comes last); the many-adapters scenario spreads its requests over its four adapters."""

from __future__ import annotations

from collections import Counter

from shared.workloads import StreamSpec, WorkloadSpec
from shared.workloads.generator import generate
from slomesh.bench.scenarios import SCENARIOS
from slomesh.bench.scenarios.adapters import ADAPTERS


def _spec(adapters: list[str]) -> WorkloadSpec:
    stream = StreamSpec(
        name="s", slo_class="interactive", models=["m"], adapters=adapters, rate_rps=5.0
    )
    return WorkloadSpec(streams=[stream], requests=400)


def test_requests_pick_adapters_uniformly_and_deterministically() -> None:
    first, again = generate(_spec(["a", "b"]), 3), generate(_spec(["a", "b"]), 3)
    assert [r.adapter for r in first] == [r.adapter for r in again]
    counts = Counter(r.adapter for r in first)
    assert set(counts) == {"a", "b"} and min(counts.values()) > 150
    assert all(r.model == "m" for r in first)


def test_a_stream_without_adapters_draws_as_before() -> None:
    plain, with_adapters = generate(_spec([]), 3), generate(_spec(["a", "b"]), 3)
    assert all(r.adapter is None for r in plain)
    same = [(r.arrival_s, r.input_tokens, r.true_output_tokens) for r in plain]
    assert same == [(r.arrival_s, r.input_tokens, r.true_output_tokens) for r in with_adapters]


def test_many_adapters_scenario_uses_its_four_adapters_on_two_slotted_instances() -> None:
    spec = SCENARIOS.create("many-adapters")
    requests = generate(spec.workload, 0)
    assert {r.adapter for r in requests} == set(ADAPTERS)
    assert {r.model for r in requests} == {"llama-3.1-8b"}
    assert spec.cluster.engine.adapter_slots == 2 and spec.cluster.engine.adapter_load_s > 0
    assert "slomesh-adapters" in spec.default_stacks
