"""Workload profiling: μ_o, σ_o, count, p50/p90 of output tokens per (model, SLO class)."""

from __future__ import annotations

import math

import pytest

from services.profiler.core.workload import GroupWorkload, parse_records_jsonl, workload_profile
from shared.domain import SLO, Request
from shared.metrics.records import RequestRecord


def rec(model: str, cls: str, out: int, **extra: object) -> dict[str, object]:
    return {"model": model, "slo_class": cls, "output_tokens": out, **extra}


def test_worked_example() -> None:
    # interactive: outputs 10, 20, 30, 40 -> μ = 25, σ = sqrt(((15² + 5² + 5² + 15²) / 3))
    # = sqrt(500 / 3) = 12.91; p50 = 25 (between 20 and 30); p90 at rank 0.9·3 = 2.7:
    # 30 + 0.7·10 = 37
    records = [
        rec("m", "interactive", 10),
        rec("m", "interactive", 20),
        rec("m", "interactive", 30),
        rec("m", "interactive", 40),
        rec("m", "batch", 100),
        rec("m", "batch", 7, rejected=True),  # skipped: never generated
        rec("m", "batch", 9, finish_s=None),  # skipped: unfinished
    ]
    interactive, batch = sorted(workload_profile(records), key=lambda g: g.slo_class)[::-1]
    assert interactive == GroupWorkload("m", "interactive", 4, 25.0, interactive.std_output_tokens,
                                        25.0, 37.0)  # fmt: skip
    assert interactive.std_output_tokens == pytest.approx(math.sqrt(500 / 3))
    assert batch == GroupWorkload("m", "batch", 1, 100.0, 0.0, 100.0, 100.0)


@pytest.mark.parametrize(
    ("records", "groups"),
    [
        ([], []),
        ([rec("a", "x", 5)], [("a", "x", 1, 5.0, 0.0)]),
        (
            [rec("a", "x", 1), rec("a", "x", 3), rec("b", "x", 8), rec("a", "y", 2)],
            [("a", "x", 2, 2.0, math.sqrt(2)), ("a", "y", 1, 2.0, 0.0), ("b", "x", 1, 8.0, 0.0)],
        ),
        # "class_name" (the simulator's record field) is accepted for "slo_class"
        (
            [{"model": "a", "class_name": "x", "output_tokens": 4}, rec("a", "x", 6)],
            [("a", "x", 2, 5.0, math.sqrt(2))],
        ),
        ([rec("a", "x", 4, finished=False), rec("a", "x", 6)], [("a", "x", 1, 6.0, 0.0)]),
    ],
)
def test_groups(
    records: list[dict[str, object]], groups: list[tuple[str, str, int, float, float]]
) -> None:
    got = [
        (g.model, g.slo_class, g.count, g.mean_output_tokens, g.std_output_tokens)
        for g in workload_profile(records)
    ]
    assert got == pytest.approx(groups)


def test_simulator_records() -> None:
    def record(rid: str, out: int, finish: float | None) -> RequestRecord:
        r = Request(rid, "m", 10, 100, 0.0, SLO(1.0, class_name="interactive"))
        return RequestRecord.from_request(r, "i0", 0.5 if finish else None, finish, out)

    groups = workload_profile([record("a", 10, 2.0), record("b", 30, 3.0), record("c", 99, None)])
    assert [(g.model, g.slo_class, g.count, g.mean_output_tokens) for g in groups] == [
        ("m", "interactive", 2, 20.0)
    ]


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        ({"slo_class": "x", "output_tokens": 1}, "'model'"),
        ({"model": "m", "output_tokens": 1}, "'class_name'"),
        ({"model": "m", "slo_class": "x"}, "'output_tokens'"),
        (rec("m", "x", -1), "output_tokens must be an int >= 0"),
        (rec("m", "x", 1.5), "output_tokens must be an int >= 0"),  # type: ignore[arg-type]
    ],
)
def test_bad_records_name_the_field(record: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError, match="record 0") as err:
        workload_profile([record])
    assert needle in str(err.value)


def test_parse_jsonl() -> None:
    text = '{"model": "m", "slo_class": "x", "output_tokens": 3}\n\n{"model": "m"}\n'
    assert len(parse_records_jsonl(text.splitlines())) == 2
    with pytest.raises(ValueError, match=r"r\.jsonl:2: not JSON"):
        parse_records_jsonl(["{}", "{nope"], "r.jsonl")
    with pytest.raises(ValueError, match=r"r\.jsonl:1: expected a JSON object"):
        parse_records_jsonl(["[1]"], "r.jsonl")
