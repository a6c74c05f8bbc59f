"""Max-min fair shares (water-filling), Jain's index, per-tenant service in the arrival window,
and the summary's per-tenant / per-band fields."""

from __future__ import annotations

import pytest

from shared.metrics.fairness import jain, jain_of_service, tenant_service, water_fill
from shared.metrics.records import RequestRecord, RunResult
from shared.metrics.summary import band_name, summarize


@pytest.mark.parametrize(
    ("demands", "capacity", "expected"),
    [
        ({"a": 10, "b": 50}, 40, {"a": 10, "b": 30}),  # the small demand is met in full
        ({"a": 10, "b": 50}, 10, {"a": 5, "b": 5}),  # both above the level: equal shares
        ({"a": 10, "b": 50}, 100, {"a": 10, "b": 50}),  # enough for everyone
        ({"a": 5, "b": 20, "c": 20}, 35, {"a": 5, "b": 15, "c": 15}),
        ({"a": 0, "b": 20}, 10, {"a": 0, "b": 10}),
    ],
)
def test_water_fill(demands: dict[str, float], capacity: float, expected: dict[str, float]) -> None:
    assert water_fill(demands, capacity) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 1, 1], 1.0), ([1, 0], 0.5), ([1, 0, 0, 0], 0.25), ([], 1.0), ([2, 1], 0.9)],
)
def test_jain(values: list[float], expected: float) -> None:
    assert jain(values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("demands", "served", "expected"),
    [
        # max-min fair: the light tenant got all it asked, the heavy one the rest
        ({"light": 10, "heavy": 50}, {"light": 10, "heavy": 30}, 1.0),
        # FCFS in proportion to demand: light 1/6 of 40 against a share of 10
        ({"light": 10, "heavy": 50}, {"light": 40 / 6, "heavy": 200 / 6}, 0.9412),
        # the light tenant starved
        ({"light": 10, "heavy": 50}, {"light": 0, "heavy": 40}, 0.5),
        ({"only": 10}, {"only": 3}, 1.0),
    ],
)
def test_jain_of_service_against_fair_shares(
    demands: dict[str, float], served: dict[str, float], expected: float
) -> None:
    assert jain_of_service(demands, served) == pytest.approx(expected, abs=1e-4)


def rec(
    rid: str,
    tenant: str,
    arrival: float,
    first: float | None,
    finish: float | None,
    out: int = 11,
    criticality: int = 0,
    rejected_s: float | None = None,
) -> RequestRecord:
    return RequestRecord(
        rid,
        "m",
        "c",
        tenant,
        "i0" if finish is not None else None,
        arrival,
        100,
        out if finish is not None else 0,
        first,
        finish,
        5.0,
        None,
        None,
        rejected=rejected_s is not None,
        reject_reason="shed" if rejected_s is not None else "",
        criticality=criticality,
        rejected_s=rejected_s,
    )


def test_tenant_service_counts_the_arrival_window_pro_rata() -> None:
    records = [
        rec("a1", "a", 0.0, 1.0, 3.0),  # done by the window's end (10 s): 111 tokens
        rec("a2", "a", 7.0, 8.0, 12.0),  # half its decode by 10 s: 100 + 1 + 5
        rec("b1", "b", 5.0, None, None, rejected_s=5.0),  # rejected: demand only
        rec("b2", "b", 10.0, 11.0, 12.0),  # first token after the window: nothing served
    ]
    demand, served = tenant_service(records)
    assert served == pytest.approx({"a": 111 + 106, "b": 0.0})
    assert demand == pytest.approx({"a": 222, "b": 100 + 11 + 111})


def test_summary_reports_tenants_bands_and_answer_times() -> None:
    records = [
        rec("c1", "t1", 0.0, 1.0, 2.0, criticality=1),
        rec("s1", "t2", 0.0, None, None, criticality=-1, rejected_s=0.0),
        rec("s2", "t2", 1.0, None, None, criticality=-1, rejected_s=1.5),
        rec("n1", "t2", 2.0, 9.0, 10.0, criticality=0),  # misses its 5 s TTFT
    ]
    s = summarize(RunResult("p", records, [], 0.0, 10.0, 0.0))
    assert s.attainment_by_tenant == {"t1": 1.0, "t2": 0.0}
    assert s.attainment_by_band == {"critical": 1.0, "sheddable": 0.0, "standard": 0.0}
    assert s.rejected_by_band == {"critical": 0, "sheddable": 2, "standard": 0}
    assert s.reject_answer_max_s_by_band == {"sheddable": 0.5}
    assert [band_name(c) for c in (3, 0, -2)] == ["critical", "standard", "sheddable"]
