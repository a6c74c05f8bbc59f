"""QLM request groups (Algorithm 1): split rule, nearest-group assignment, k-means re-clustering,
output statistics, removal and config validation. Every expected value is checkable by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from services.scheduler.core.qlm.clustering import cluster_labels, match_previous, split_halves
from services.scheduler.core.qlm.groups import (
    Grouper,
    GroupingConfig,
    OutputEstimate,
    RequestGroup,
)
from shared.domain import SLO, Request

TTFT_S = {"interactive": 20.0, "batch": 60.0}


def req(
    rid: str,
    input_tokens: int = 100,
    *,
    model: str = "m",
    slo_class: str = "interactive",
    arrival_s: float = 0.0,
) -> Request:
    slo = SLO(TTFT_S[slo_class], class_name=slo_class)
    return Request(rid, model, input_tokens, 1024, arrival_s, slo)


def est(mean: float = 100.0, std: float = 0.0, max_tokens: int = 1024) -> OutputEstimate:
    return OutputEstimate(mean, std, max_tokens)


def ids(group: RequestGroup) -> list[str]:
    return [r.request_id for r, _ in group.queue]


def all_ids(grouper: Grouper) -> list[str]:
    return sorted(rid for g in grouper.groups() for rid in ids(g))


# --- split rule (Algorithm 1, lines 3-4) -------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "threshold", "sizes"),
    [
        (4, 4, [4]),  # at the threshold: no split (the rule is size > threshold)
        (5, 4, [3, 2]),  # older half gets the odd one
        (8, 4, [4, 4]),
        (9, 4, [3, 2, 4]),  # 9 -> 5 + 4 -> (3 + 2) + 4
        (17, 4, [3, 2, 4, 4, 4]),  # 17 -> 9 + 8 -> ((3 + 2) + 4) + (4 + 4)
        (1, 1, [1]),
    ],
)
def test_split_halves_sizes_and_order(n: int, threshold: int, sizes: list[int]) -> None:
    parts = split_halves(list(range(n)), threshold)
    assert [len(p) for p in parts] == sizes
    assert [x for p in parts for x in p] == list(range(n))  # FCFS order kept across parts


@pytest.mark.parametrize(
    ("avg_batch_size", "delta", "n", "sizes"),
    [
        (2, 2, 4, [4]),  # threshold 4: not exceeded
        (2, 2, 5, [3, 2]),  # 5 > 4: split in half, older half keeps the group
        (1, 4, 5, [3, 2]),  # same threshold from another batch size x delta
        (3, 1, 4, [2, 2]),  # threshold 3
        # ties in distance go to the newer group, so later arrivals fill the newer half:
        # 6 -> [3, 3], 7 -> [3, 4], 8 -> [3, 5] -> split -> [3, 3, 2]
        (2, 2, 8, [3, 3, 2]),
    ],
)
def test_assign_splits_past_avg_batch_times_delta(
    avg_batch_size: int, delta: int, n: int, sizes: list[int]
) -> None:
    grouper = Grouper(GroupingConfig(avg_batch_size=avg_batch_size, delta=delta))
    last = None
    for i in range(n):
        last = grouper.assign(req(f"r{i}", arrival_s=float(i)), est(), now_s=float(i))
    groups = grouper.groups()
    assert [g.size for g in groups] == sizes
    assert [rid for g in groups for rid in ids(g)] == [f"r{i}" for i in range(n)]
    assert last is not None and f"r{n - 1}" in last  # assign returns where the request ended up
    assert len(grouper) == n


def test_split_keeps_old_id_for_older_half_and_new_id_for_newer() -> None:
    grouper = Grouper(GroupingConfig(avg_batch_size=2, delta=2))
    for i in range(4):
        grouper.assign(req(f"r{i}", arrival_s=float(i)), est(), now_s=float(i))
    g = grouper.assign(req("r4", arrival_s=4.0), est(), now_s=4.0)
    assert g.group_id == "m/interactive/1" and ids(g) == ["r3", "r4"] and g.created_s == 4.0
    old = grouper.group("m/interactive/0")
    assert ids(old) == ["r0", "r1", "r2"]
    assert grouper.group_of("r1") is old and grouper.group_of("r3") is g


# --- assignment ----------------------------------------------------------------------------------


@pytest.fixture
def four_groups() -> Grouper:
    """Groups 0: m/interactive short, 1: m/interactive 3K, 2: other model short, 3: batch short."""
    grouper = Grouper()
    grouper.assign(req("a", 100), est(), 0.0)
    grouper.assign(req("b", 3000), est(), 0.0)
    grouper.assign(req("c", 100, model="other"), est(), 0.0)
    grouper.assign(req("d", 100, slo_class="batch"), est(), 0.0)
    assert len(grouper.groups()) == 4
    return grouper


@pytest.mark.parametrize(
    ("model", "slo_class", "input_tokens", "expected"),
    [
        ("m", "interactive", 120, "m/interactive/0"),  # nearest: the short group
        ("m", "interactive", 2500, "m/interactive/1"),  # nearest: the 3K group
        ("other", "interactive", 3000, "new"),  # its model has no 3K group: a new one
        ("other", "interactive", 110, "other/interactive/2"),
        ("m", "batch", 110, "m/batch/3"),  # the batch group, never the interactive short one
        ("m", "batch", 3000, "new"),  # an interactive 3K group exists but is another class
        ("unseen", "interactive", 100, "new"),
    ],
)
def test_assign_joins_nearest_group_of_same_model_and_class(
    four_groups: Grouper, model: str, slo_class: str, input_tokens: int, expected: str
) -> None:
    r = req("x", input_tokens, model=model, slo_class=slo_class)
    g = four_groups.assign(r, est(), 1.0)
    if expected == "new":
        assert g.group_id == f"{model}/{slo_class}/4" and g.size == 1
    else:
        assert g.group_id == expected and g.size == 2
    for group in four_groups.groups():  # groups never mix models or classes
        assert {m.model for m, _ in group.queue} == {group.model}
        assert {m.slo.class_name for m, _ in group.queue} == {group.slo_class}


@pytest.mark.parametrize(
    ("input_tokens", "mean_out", "joins"),
    [
        (100, 100.0, True),  # distance 0
        (250, 100.0, True),  # ln(251/101) = 0.910
        (270, 100.0, True),  # ln(271/101) = 0.987
        (280, 100.0, False),  # ln(281/101) = 1.023 > 1.0
        (100, 260.0, True),  # ln(261/101) = 0.949 on the output axis
        (100, 300.0, False),  # ln(301/101) = 1.092
        (230, 230.0, False),  # both axes ln(231/101) = 0.827 -> 0.827 * sqrt(2) = 1.170
        (180, 180.0, True),  # ln(181/101) = 0.583 -> 0.825
    ],
)
def test_new_group_beyond_join_max_distance(
    input_tokens: int, mean_out: float, joins: bool
) -> None:
    grouper = Grouper(GroupingConfig(join_max_distance=1.0))
    first = grouper.assign(req("a", 100), est(100.0), 0.0)
    g = grouper.assign(req("b", input_tokens), est(mean_out), 1.0)
    assert (g is first) is joins
    assert len(grouper.groups()) == (1 if joins else 2)


def test_assign_rejects_a_request_already_queued() -> None:
    grouper = Grouper()
    grouper.assign(req("a"), est(), 0.0)
    with pytest.raises(ValueError, match="already queued"):
        grouper.assign(req("a"), est(), 1.0)
    assert len(grouper) == 1


def test_out_of_order_arrival_is_queued_by_arrival_time() -> None:
    grouper = Grouper()
    grouper.assign(req("late", arrival_s=5.0), est(), 5.0)
    grouper.assign(req("later", arrival_s=7.0), est(), 7.0)
    g = grouper.assign(req("evicted", arrival_s=1.0), est(), 8.0)  # back from an eviction
    assert ids(g) == ["evicted", "late", "later"]
    assert g.earliest_deadline_abs_s == 1.0 + 20.0
    assert g.position_of("late") == 1 and g.arrival_of("later") == 7.0


# --- re-clustering (Algorithm 1, line 1, then the split rule) -----------------------------------


def short_and_long(n_each: int) -> list[Request]:
    """Interleaved arrivals: short chat prompts (100-145 tokens) and 3K-token prompts."""
    out = []
    for i in range(n_each):
        out.append(req(f"s{i}", 100 + 5 * i, arrival_s=2.0 * i))
        out.append(req(f"l{i}", 3000 + 50 * i, arrival_s=2.0 * i + 1.0))
    return out


def test_cluster_labels_separates_two_modes_and_keeps_one() -> None:
    points = np.log1p(np.array([[100, 100], [120, 90], [3000, 100], [3500, 110], [110, 95]]))
    labels = cluster_labels(points, max_radius=1.4, max_k=8, seed=0).tolist()
    assert labels[0] == labels[1] == labels[4] != labels[2] == labels[3]
    homogeneous = np.log1p(np.array([[100, 100], [150, 120], [200, 90]], dtype=np.float64))
    assert cluster_labels(homogeneous, max_radius=1.4, max_k=8, seed=0).tolist() == [0, 0, 0]


def test_recluster_separates_short_from_3k_prompts_and_conserves_requests() -> None:
    grouper = Grouper(GroupingConfig(join_max_distance=5.0))  # loose: everything joins one
    requests = short_and_long(10)
    for r in requests:
        grouper.assign(r, est(), r.arrival_s)
    assert [g.group_id for g in grouper.groups()] == ["m/interactive/0"]

    grouper.config = GroupingConfig()  # default radius 1.4 < half the short-3K gap (1.7)
    result = grouper.recluster(now_s=30.0)

    groups = grouper.groups()
    assert result.removed == ("m/interactive/0",)
    assert (
        result.created
        == tuple(g.group_id for g in groups)
        == ("m/interactive/1", "m/interactive/2")
    )
    assert ids(groups[0]) == [f"s{i}" for i in range(10)]  # FCFS inside, oldest cluster first
    assert ids(groups[1]) == [f"l{i}" for i in range(10)]
    assert all_ids(grouper) == sorted(r.request_id for r in requests)  # each exactly once
    assert len(grouper) == 20
    for rid in all_ids(grouper):
        group = grouper.group_of(rid)
        assert group is not None and rid in group


def test_recluster_applies_split_rule_repeatedly() -> None:
    grouper = Grouper(GroupingConfig(avg_batch_size=2, delta=2, join_max_distance=5.0))
    for i in range(10):
        grouper.assign(req(f"r{i}", 100 + i, arrival_s=float(i)), est(), float(i))
    grouper.recluster(now_s=10.0)
    # one cluster of 10 > 4 -> 5 + 5 -> (3 + 2) + (3 + 2), contiguous FCFS runs
    assert [ids(g) for g in grouper.groups()] == [
        ["r0", "r1", "r2"],
        ["r3", "r4"],
        ["r5", "r6", "r7"],
        ["r8", "r9"],
    ]


def test_recluster_keeps_ids_when_grouping_is_unchanged() -> None:
    grouper = Grouper()
    for r in short_and_long(5):
        grouper.assign(r, est(), r.arrival_s)
    before = {g.group_id: ids(g) for g in grouper.groups()}
    assert len(before) == 2  # the default radius already separates them on arrival
    result = grouper.recluster(now_s=10.0)
    assert not result.changed
    assert {g.group_id: ids(g) for g in grouper.groups()} == before


@pytest.mark.parametrize(
    ("parts", "sizes", "expected"),
    [
        ([["A", "A", "B"], ["B", "B"]], {"A": 2, "B": 3}, ["A", "B"]),
        ([["A", "B"]], {"A": 1, "B": 1}, [None]),  # no strict majority of the part
        ([["A"] * 3, ["A"] * 3], {"A": 6}, [None, None]),  # neither holds most of A
        ([["A"] * 4, ["A"] * 3], {"A": 7}, ["A", None]),
    ],
)
def test_match_previous_needs_a_majority_both_ways(
    parts: list[list[str]], sizes: dict[str, int], expected: list[str | None]
) -> None:
    assert match_previous(parts, sizes) == expected


def test_recluster_reuses_ids_by_majority_and_skips_partitions_without_arrivals() -> None:
    grouper = Grouper(GroupingConfig(avg_batch_size=2, delta=2))
    for i in range(8):
        grouper.assign(req(f"r{i}", arrival_s=float(i)), est(), float(i))
    assert [ids(g) for g in grouper.groups()] == [
        ["r0", "r1", "r2"],
        ["r3", "r4", "r5"],
        ["r6", "r7"],
    ]
    result = grouper.recluster(8.0)  # 8 -> 4 + 4
    # part r0-r3: 3 of its 4 from group 0, which it holds 3 of 3 of -> keeps id 0;
    # part r4-r7: 2 from group 1 and 2 from group 2, no majority -> a new group 3
    assert result.created == ("m/interactive/3",)
    assert result.removed == ("m/interactive/1", "m/interactive/2")
    assert [(g.group_id, ids(g)) for g in grouper.groups()] == [
        ("m/interactive/0", ["r0", "r1", "r2", "r3"]),
        ("m/interactive/3", ["r4", "r5", "r6", "r7"]),
    ]
    grouper.remove("r4")
    grouper.remove("r5")
    assert not grouper.recluster(20.0).changed  # departures only: left as it is


def test_recluster_is_deterministic_given_the_seed() -> None:
    rng = np.random.default_rng(7)  # test data only; the grouper has no RNG of its own

    def build() -> list[tuple[str, list[str]]]:
        grouper = Grouper(GroupingConfig(join_max_distance=6.0, seed=3))
        for i, (n_in, n_out) in enumerate(data):
            r = req(f"r{i}", int(n_in), arrival_s=float(i))
            grouper.assign(r, est(float(n_out)), float(i))
        grouper.config = GroupingConfig(join_max_distance=0.8, seed=3)  # k-means has work to do
        grouper.recluster(now_s=float(len(data)))
        return [(g.group_id, ids(g)) for g in grouper.groups()]

    data = np.exp(rng.uniform(3.0, 8.0, size=(60, 2)))
    first = build()
    assert build() == first
    assert sorted(rid for _, members in first for rid in members) == sorted(
        f"r{i}" for i in range(60)
    )


def test_due_after_recluster_interval() -> None:
    grouper = Grouper(GroupingConfig(recluster_interval_s=5.0))
    assert grouper.due(0.0)  # never re-clustered yet
    grouper.recluster(10.0)
    assert not grouper.due(14.9)
    assert grouper.due(15.0)


# --- statistics and removal ----------------------------------------------------------------------


def test_output_stats_law_of_total_variance() -> None:
    g = RequestGroup("g", "m", "interactive", 20.0, created_s=0.0)
    g.add(req("a", 10, arrival_s=0.0), est(100.0, 10.0, 400))
    g.add(req("b", 30, arrival_s=1.0), est(300.0, 30.0, 1000))
    mu, sigma, mx = g.output_stats()
    # mean of variances (100 + 900) / 2 = 500, variance of means ((100-200)^2 + (300-200)^2)/2
    assert (mu, mx) == (200.0, 1000)
    assert sigma == pytest.approx(math.sqrt(500.0 + 10_000.0))
    assert g.input_tokens_sum == 40 and g.output_tokens_mean_sum == 400.0
    assert g.remove("b") and not g.remove("b")
    assert g.output_stats() == pytest.approx((100.0, 10.0, 400))  # max recomputed without "b"
    assert g.pop_head()[0].request_id == "a"
    assert g.output_stats() == (0.0, 0.0, 0) and g.earliest_deadline_abs_s == math.inf


def test_remove_drops_empty_groups() -> None:
    grouper = Grouper()
    grouper.assign(req("a1", 100, arrival_s=0.0), est(), 0.0)
    grouper.assign(req("a2", 110, arrival_s=1.0), est(), 1.0)
    grouper.assign(req("b1", 3000, arrival_s=2.0), est(), 2.0)
    g = grouper.remove("a1")
    assert g is not None and g.size == 1 and grouper.group(g.group_id) is g
    assert grouper.group_of("a1") is None and len(grouper) == 2

    g = grouper.remove("a2")
    assert g is not None and g.size == 0  # size 0: dropped, the caller drops it from its VQ
    assert g.group_id not in [x.group_id for x in grouper.groups()]
    with pytest.raises(KeyError):
        grouper.group(g.group_id)
    assert grouper.remove("a2") is None and grouper.remove("never") is None

    long_group = grouper.group_of("b1")
    assert long_group is not None
    assert grouper.pop_head(long_group.group_id) is not None
    assert grouper.pop_head(long_group.group_id) is None
    assert grouper.groups() == [] and len(grouper) == 0


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("delta", 0),
        ("avg_batch_size", 0),
        ("max_k_per_partition", 0),
        ("recluster_interval_s", -1.0),
        ("seed", -1),
        ("join_max_distance", 0.0),
        ("no_such_knob", 1),
    ],
)
def test_config_validation_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        GroupingConfig.model_validate({field: value})


def test_config_defaults_and_threshold() -> None:
    cfg = GroupingConfig()
    assert (cfg.delta, cfg.avg_batch_size, cfg.split_threshold) == (4, 32, 128)


@pytest.mark.parametrize(
    ("mean", "std", "max_tokens", "name"),
    [(-1.0, 0.0, 1, "mean_tokens"), (1.0, -0.5, 1, "std_tokens"), (1.0, 0.0, 0, "max_tokens")],
)
def test_output_estimate_validation_names_the_field(
    mean: float, std: float, max_tokens: int, name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        OutputEstimate(mean, std, max_tokens)
