"""summarize(): every aggregate of the hand-computed run in conftest.py, plus guards."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from shared.metrics.records import InstanceStats, RequestRecord, RunResult
from shared.metrics.summary import ClassSummary, StackSummary, percentile, round_sig, summarize

# Finished requests r1, r2, r3, r6 (see conftest.py):
#   TTFT sorted [0.5, 0.5, 1.0, 2.0]; TPOT sorted [0.0, 0.2, 0.25, 0.5]; E2E sorted [1, 2.5, 3, 6].
# numpy linear percentile over n=4 sorts: position = q/100 * 3.
#   p50 -> pos 1.5, p90 -> pos 2.7, p99 -> pos 2.97.
EXPECTED: list[tuple[str, object]] = [
    ("stack", "fcfs"),
    ("requests", 6),
    # met: r1 and r6 -> 2/6
    ("slo_attainment", 2 / 6),
    # chat: r1 met, r2 not -> 1/2; batch: r3 r4 r5 r6, only r6 met -> 1/4
    ("attainment_by_class", {"batch": 0.25, "chat": 0.5}),
    # finished with a TPOT target: r1 0.2 <= 0.25, r2 0.25 <= 0.25, r3 0.5 > 0.1, r6 (1 token) 0
    ("tpot_attainment_admitted", 0.75),
    # 2 met / 10 s
    ("goodput_rps", 0.2),
    # 4 finished / 10 s
    ("throughput_rps", 0.4),
    # (11 + 5 + 12 + 1) tokens / 10 s
    ("throughput_tok_s", 2.9),
    # TTFT: p50 = (0.5 + 1.0)/2; p90 = 1.0 + 0.7*(2.0-1.0); p99 = 1.0 + 0.97*1.0
    ("ttft_p50_s", 0.75),
    ("ttft_p90_s", 1.7),
    ("ttft_p99_s", 1.97),
    # TPOT: p50 = (0.2 + 0.25)/2; p90 = 0.25 + 0.7*0.25; p99 = 0.25 + 0.97*0.25
    ("tpot_p50_s", 0.225),
    ("tpot_p90_s", 0.425),
    ("tpot_p99_s", 0.4925),
    # E2E: p50 = (2.5 + 3.0)/2; p90 = 3.0 + 0.7*3.0; p99 = 3.0 + 0.97*3.0
    ("e2e_p50_s", 2.75),
    ("e2e_p90_s", 5.1),
    ("e2e_p99_s", 5.91),
    ("rejected", 1),  # r4
    ("unfinished", 1),  # r5
    ("evictions", 3),  # 1 + 2
    ("swaps", 2),  # 2 + 0
    # (6 + 4) busy seconds / (2 instances * 10 s)
    ("gpu_busy", 0.5),
    # (0.5 + 0.3) / 2
    ("kv_occupancy_mean", 0.4),
    # population std of [4.0, 8.0]: mean 6, deviations ±2 -> 2.0
    ("load_imbalance_s", 2.0),
    ("wall_s", 1.5),
    ("duration_s", 10.0),
]


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[n for n, _ in EXPECTED])
def test_aggregate_matches_hand_computation(
    summary: StackSummary, name: str, expected: object
) -> None:
    got = getattr(summary, name)
    if isinstance(expected, float):
        assert got == pytest.approx(expected, abs=1e-12)
    elif isinstance(expected, dict):
        assert got == pytest.approx(expected, abs=1e-12)
        assert list(got) == sorted(expected)
    else:
        assert got == expected


# chat: r1 (ttft 0.5, tpot 0.2, e2e 2.5), r2 (ttft 2.0, tpot 0.25, e2e 3.0)
#   ttft p50 = 1.25, ttft p99 = 0.5 + 0.99*1.5 = 1.985, tpot p50 = 0.225, e2e p50 = 2.75
# batch: 4 requests, finished r3 (ttft 0.5, tpot 0.5, e2e 6.0), r6 (ttft 1.0, tpot 0, e2e 1.0)
#   ttft p50 = 0.75, ttft p99 = 0.5 + 0.99*0.5 = 0.995, tpot p50 = 0.25, e2e p50 = 3.5
BY_CLASS = [
    ("chat", ClassSummary(2, 0.5, 1.25, 1.985, 0.225, 2.75)),
    ("batch", ClassSummary(4, 0.25, 0.75, 0.995, 0.25, 3.5)),
]


@pytest.mark.parametrize(("cls", "expected"), BY_CLASS, ids=[c for c, _ in BY_CLASS])
def test_by_class_detail(summary: StackSummary, cls: str, expected: ClassSummary) -> None:
    got = summary.by_class[cls]
    assert got.requests == expected.requests
    for field in ("attainment", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "e2e_p50_s"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), abs=1e-12), field


def test_by_class_keys_sorted_and_match_attainment(summary: StackSummary) -> None:
    assert list(summary.by_class) == ["batch", "chat"]
    for name, cs in summary.by_class.items():
        assert summary.attainment_by_class[name] == cs.attainment


def test_zero_duration_gives_zero_rates(run: RunResult) -> None:
    base = run
    run = RunResult(base.stack, base.records, base.instances, 5.0, 5.0, 0.1)
    s = summarize(run)
    assert (s.goodput_rps, s.throughput_rps, s.throughput_tok_s, s.gpu_busy) == (0, 0, 0, 0)
    assert s.duration_s == 0.0
    assert s.slo_attainment == pytest.approx(2 / 6)  # attainment does not depend on duration


def test_empty_run() -> None:
    s = summarize(RunResult("none", [], [], 0.0, 10.0, 0.0))
    assert s.requests == 0
    assert s.slo_attainment == 0.0
    assert s.attainment_by_class == {}
    assert s.by_class == {}
    assert s.ttft_p50_s is None and s.tpot_p99_s is None and s.e2e_p90_s is None
    assert (s.gpu_busy, s.kv_occupancy_mean, s.load_imbalance_s) == (0.0, 0.0, 0.0)


def test_no_finished_requests_gives_none_percentiles(
    make_rec: Callable[..., RequestRecord],
) -> None:
    records = [make_rec("a", "chat", None, 0.0, None, None, 5, 1.0, None, rejected=True)]
    s = summarize(RunResult("p", records, [], 0.0, 1.0, 0.0))
    assert s.rejected == 1 and s.unfinished == 0
    assert s.ttft_p50_s is None and s.e2e_p99_s is None
    assert s.by_class["chat"].ttft_p50_s is None
    assert s.by_class["chat"].attainment == 0.0


def _inst(name: str, last: float | None) -> InstanceStats:
    return InstanceStats(name, "H100", 1.0, 0.0, 0, 0, last, 0 if last is None else 1)


@pytest.mark.parametrize(
    ("lasts", "expected"),
    [
        ([], 0.0),
        ([7.0], 0.0),  # fewer than two instances finished something
        ([7.0, None], 0.0),  # the idle one does not count
        ([4.0, 8.0, None], 2.0),
        ([1.0, 2.0, 3.0], (2 / 3) ** 0.5),  # population std: var = (1 + 0 + 1) / 3
    ],
)
def test_load_imbalance(lasts: list[float | None], expected: float) -> None:
    insts = [_inst(f"i{k}", v) for k, v in enumerate(lasts)]
    s = summarize(RunResult("p", [], insts, 0.0, 10.0, 0.0))
    assert s.load_imbalance_s == pytest.approx(expected)


def test_rejected_record_with_finish_time_counts_as_rejected_only(
    make_rec: Callable[..., RequestRecord],
) -> None:
    r = make_rec("a", "chat", "i0", 0.0, 0.1, 0.2, 2, 1.0, None, rejected=True)
    s = summarize(RunResult("p", [r], [], 0.0, 1.0, 0.0))
    assert (s.rejected, s.unfinished, s.throughput_rps, s.slo_attainment) == (1, 0, 0.0, 0.0)
    assert s.ttft_p50_s is None


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([], 50, None), ([3.0], 99, 3.0), ([1.0, 2.0], 50, 1.5), ([0.0, 10.0], 90, 9.0)],
)
def test_percentile(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1 / 3, 0.333333),
        (2 / 3, 0.666667),
        (123456789.0, 123457000.0),
        (0.0, 0.0),
        (-0.000123456789, -0.000123457),
        (float("nan"), None),
        (float("inf"), None),
    ],
)
def test_round_sig(value: float, expected: float | None) -> None:
    assert round_sig(value) == expected


def test_to_dict_is_json_ready(summary: StackSummary) -> None:
    d = summary.to_dict()
    assert list(d) == [
        "stack",
        "slo_attainment",
        "attainment_by_class",
        "tpot_attainment_admitted",
        "goodput_rps",
        "throughput_rps",
        "throughput_tok_s",
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p90_s",
        "tpot_p99_s",
        "e2e_p50_s",
        "e2e_p90_s",
        "e2e_p99_s",
        "rejected",
        "unfinished",
        "requests",
        "evictions",
        "swaps",
        "gpu_busy",
        "kv_occupancy_mean",
        "load_imbalance_s",
        "wall_s",
        "duration_s",
        "by_class",
        "prefix_hit_rate",
        "jain_index",
        "attainment_by_tenant",
        "attainment_by_band",
        "rejected_by_band",
        "reject_answer_max_s_by_band",
    ]
    assert d["slo_attainment"] == 0.333333
    assert d["attainment_by_class"] == {"batch": 0.25, "chat": 0.5}
    assert d["by_class"]["chat"] == {
        "requests": 2,
        "attainment": 0.5,
        "ttft_p50_s": 1.25,
        "ttft_p99_s": 1.985,
        "tpot_p50_s": 0.225,
        "e2e_p50_s": 2.75,
    }
    assert isinstance(d["rejected"], int) and d["rejected"] == 1
    assert json.loads(json.dumps(d, allow_nan=False)) == d


def test_to_dict_keeps_none() -> None:
    d = summarize(RunResult("none", [], [], 0.0, 1.0, 0.0)).to_dict()
    assert d["ttft_p50_s"] is None and d["e2e_p99_s"] is None
    assert json.loads(json.dumps(d))["tpot_p90_s"] is None


def test_summary_is_frozen(summary: StackSummary) -> None:
    with pytest.raises(AttributeError):
        summary.stack = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("caches", "expected"),
    [
        ([(0, 0), (0, 0)], 0.0),  # no prefix cache looked up anything
        ([(300, 1000), (100, 1000)], 0.2),  # tokens, summed over instances
        ([(900, 1000), (0, 0)], 0.9),
    ],
)
def test_prefix_hit_rate_is_token_weighted_over_instances(
    run: RunResult, caches: list[tuple[int, int]], expected: float
) -> None:
    instances = [
        InstanceStats(f"i{k}", "H100", 1.0, 0.0, 0, 0, None, 0, hit, prompt)
        for k, (hit, prompt) in enumerate(caches)
    ]
    with_caches = RunResult(run.stack, run.records, instances, run.start_s, run.end_s, 1.0)
    assert summarize(with_caches).prefix_hit_rate == pytest.approx(expected)
    assert "prefix_hit_rate" in summarize(with_caches).to_dict()
