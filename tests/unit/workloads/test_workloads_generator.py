"""generate(): determinism, stream split, merging, request fields."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from shared.domain import Request
from shared.workloads.generator import generate, split_requests
from shared.workloads.slo_classes import get_slo_class
from shared.workloads.spec import WorkloadSpec
from shared.workloads.traces import load_azure_trace


def workload(requests: int = 3_000) -> WorkloadSpec:
    return WorkloadSpec.model_validate(
        {
            "requests": requests,
            "streams": [
                {
                    "name": "chat",
                    "slo_class": "interactive",
                    "models": ["mistral-7b", "vicuna-13b"],
                    "rate_rps": 6.0,
                    "tenant": "acme",
                },
                {
                    "name": "bulk",
                    "slo_class": "batch-2",
                    "models": ["llama-70b"],
                    "rate_rps": 3.0,
                    "arrival": "gamma",
                    "burstiness_cv": 3.0,
                    "lengths": {
                        "source": "uniform",
                        "input_min_tokens": 3_000,
                        "input_max_tokens": 4_000,
                        "max_tokens": 300,
                    },
                },
                {
                    "name": "replay",
                    "slo_class": "tight",
                    "models": ["mistral-7b"],
                    "rate_rps": 1.0,
                    "arrival": "trace",
                    "trace": "code",
                    "lengths": {"source": "azure-code", "max_input_tokens": 8_192},
                },
            ],
        }
    )


def as_tuples(reqs: list[Request]) -> list[tuple[Any, ...]]:
    return [
        (r.request_id, r.model, r.input_tokens, r.max_tokens, r.arrival_s, r.slo, r.tenant,
         r.true_output_tokens)
        for r in reqs
    ]  # fmt: skip


def test_same_seed_identical_different_seed_differs() -> None:
    spec = workload()
    a, b, c = generate(spec, 11), generate(spec, 11), generate(spec, 12)
    assert as_tuples(a) == as_tuples(b)
    assert as_tuples(a) != as_tuples(c)
    for stream in spec.streams:  # every stream, the trace replay included, depends on the seed
        cls = stream.slo_class
        assert [r.arrival_s for r in a if r.slo.class_name == cls] != [
            r.arrival_s for r in c if r.slo.class_name == cls
        ]


def test_ids_sorted_arrivals_and_stream_split() -> None:
    spec = workload()
    reqs = generate(spec, 0)
    assert len(reqs) == spec.requests
    assert [r.request_id for r in reqs] == [f"r{i:06d}" for i in range(len(reqs))]
    arrivals = [r.arrival_s for r in reqs]
    assert arrivals == sorted(arrivals)
    assert arrivals[0] > 0
    per_class = Counter(r.slo.class_name for r in reqs)
    assert per_class == {"interactive": 1_800, "batch-2": 900, "tight": 300}


def test_request_fields_come_from_the_stream() -> None:
    reqs = generate(workload(), 1)
    by_class: dict[str, list[Request]] = {}
    for r in reqs:
        by_class.setdefault(r.slo.class_name, []).append(r)
    chat, bulk, replay = by_class["interactive"], by_class["batch-2"], by_class["tight"]
    assert {r.model for r in chat} == {"mistral-7b", "vicuna-13b"}
    share = sum(r.model == "mistral-7b" for r in chat) / len(chat)
    assert share == pytest.approx(0.5, abs=0.05)
    assert {r.tenant for r in chat} == {"acme"} and {r.tenant for r in bulk} == {"default"}
    assert {r.model for r in bulk} == {"llama-70b"}
    assert all(r.slo == get_slo_class("batch-2").to_slo() for r in bulk)
    assert all(r.max_tokens == 300 for r in bulk)
    assert max(r.true_output_tokens or 0 for r in bulk) == 300  # clipped to max_tokens
    assert all(3_000 <= r.input_tokens <= 4_000 for r in bulk)
    assert all(r.max_tokens == 2_048 for r in chat + replay)
    assert replay[0].slo.tpot_target_s == 0.050


def test_trace_replay_keeps_rows_with_their_arrivals() -> None:
    reqs = [r for r in generate(workload(), 5) if r.slo.class_name == "tight"]
    trace = load_azure_trace("code")
    rows = list(zip(trace.input_tokens.tolist(), trace.output_tokens.tolist(), strict=True))
    got = [(r.input_tokens, r.true_output_tokens) for r in reqs]
    start = rows.index(got[0])
    m = len(rows)
    assert got == [rows[(start + i) % m] for i in range(len(got))]


def test_mean_rate_of_each_stream() -> None:
    spec = workload(requests=30_000)
    reqs = generate(spec, 2)
    # (a trace replay's rate is exact only over whole loops; a window of a bursty trace is not)
    for cls, rate in (("interactive", 6.0), ("batch-2", 3.0)):
        times = np.array([r.arrival_s for r in reqs if r.slo.class_name == cls])
        assert len(times) / times[-1] == pytest.approx(rate, rel=0.1)


def test_adding_a_stream_keeps_earlier_streams() -> None:
    one = WorkloadSpec.model_validate(
        {"requests": 100, "streams": [workload().streams[0].model_dump()]}
    )
    two = WorkloadSpec.model_validate(
        {"requests": 200, "streams": [s.model_dump() for s in workload().streams[:1]] + [
            {"name": "x", "slo_class": "chat", "models": ["m"], "rate_rps": 6.0}]}
    )  # fmt: skip
    first = [r.arrival_s for r in generate(one, 9)]
    again = [r.arrival_s for r in generate(two, 9) if r.slo.class_name == "interactive"]
    assert first == again


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (10, [1.0, 1.0, 1.0], [4, 3, 3]),
        (3_000, [6.0, 3.0, 1.0], [1_800, 900, 300]),
        (7, [0.5, 0.25, 0.25], [3, 2, 2]),
        (1, [1.0, 5.0], [0, 1]),
        (5, [1.0], [5]),
        (100, [1.0, 0.0, 2.0], [33, 0, 67]),
        (11, [1 / 3, 1 / 3, 1 / 3], [4, 4, 3]),
    ],
)
def test_split_requests_sums_exactly(total: int, weights: list[float], expected: list[int]) -> None:
    got = split_requests(total, weights)
    assert got == expected
    assert sum(got) == total


@pytest.mark.parametrize("total", [1, 2, 3, 97, 1_000, 99_999])
def test_split_requests_random_weights_sum(total: int) -> None:
    weights = np.random.default_rng(total).uniform(0.01, 10.0, size=7).tolist()
    got = split_requests(total, weights)
    assert sum(got) == total
    quotas = [total * w / sum(weights) for w in weights]
    assert all(abs(g - q) < 1 for g, q in zip(got, quotas, strict=True))


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_bad_seed(seed: Any) -> None:
    with pytest.raises(ValueError, match="seed"):
        generate(workload(10), seed)


def test_large_workload_builds() -> None:
    reqs = generate(workload(100_000), 3)
    assert len(reqs) == 100_000
    assert reqs[-1].request_id == "r099999"


def test_a_stream_deadline_replaces_its_class_deadline_and_keeps_the_rest() -> None:
    spec = workload(600)
    streams = [
        s.model_copy(update={"ttft_deadline_s": 120.0}) if s.name in ("bulk", "replay") else s
        for s in spec.streams
    ]
    reqs = generate(spec.model_copy(update={"streams": streams}), 3)
    by_class: dict[str, list[Request]] = {}
    for r in reqs:
        by_class.setdefault(r.slo.class_name, []).append(r)
    assert {r.slo.ttft_deadline_s for r in by_class["batch-2"]} == {120.0}
    assert {r.slo.ttft_deadline_s for r in by_class["interactive"]} == {20.0}
    tight = {(r.slo.ttft_deadline_s, r.slo.tpot_target_s) for r in by_class["tight"]}
    assert tight == {(120.0, 0.050)}  # the class's TPOT target stays
    # the same draws as without the override: only the deadlines differ
    assert [(r.request_id, r.arrival_s) for r in reqs] == [
        (r.request_id, r.arrival_s) for r in generate(spec, 3)
    ]
