"""Prefix-cache-aware placement: the approximate index, the SLO-slack score, prefix-only routing."""

from __future__ import annotations

import dataclasses

import pytest

from services.scheduler.core.cluster_view import WorkItem
from services.scheduler.core.global_policy import RoutingPolicy
from services.scheduler.core.latency_slo_admitter import predicted_ttft_tpot_s
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.prefix_affinity import PrefixAffinity, PrefixAffinityConfig
from services.scheduler.core.prefix_index import PrefixIndex
from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy
from services.scheduler.core.qlm.policy import QLMPolicy
from services.scheduler.core.routers import ROUTERS
from shared.domain import SLO, Request
from shared.domain.prefix import PromptPrefix

B = 16


def req(rid: str, blocks: list[int], tokens: int | None = None, ttft_s: float = 10.0, t=0.0):
    """A request whose prompt's leading block hashes are `blocks` (tokens: its length)."""
    n = tokens if tokens is not None else len(blocks) * B + 8
    return Request(
        rid,
        "m",
        n,
        50,
        t,
        SLO(ttft_s),
        true_output_tokens=20,
        prefix=PromptPrefix(B, tuple(blocks)),
    )


# ---- the index ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("capacity", "placed", "probe", "expected"),
    [
        (100, [[1, 2, 3]], [1, 2, 3, 4], 3),
        (100, [[1, 2, 3]], [1, 9, 3], 1),  # chained: a mismatch ends the prefix
        (100, [[1, 2, 3]], [7, 2, 3], 0),
        (3, [[1, 2, 3], [4, 5]], [1, 2, 3], 0),  # 1, 2 expired (LRU) when 4, 5 came in
        (4, [[1, 2], [4, 5], [1, 2], [6, 7]], [1, 2], 2),  # 1, 2 touched again: 4, 5 expire
        (0, [[1, 2]], [1, 2], 0),
    ],
)
def test_scheduler_prefix_index_lru_by_capacity(capacity, placed, probe, expected):
    index = PrefixIndex()
    index.set_capacity("a", capacity)
    for k, blocks in enumerate(placed):
        index.record_placement("a", req(f"r{k}", blocks))
    assert index.matched_blocks("a", req("p", probe)) == expected
    assert index.matched_blocks("b", req("p", probe)) == 0  # per replica
    assert index.size("a") <= capacity


def test_scheduler_prefix_index_counts_predicted_hits_and_completions():
    index = PrefixIndex()
    index.set_capacity("a", 100)
    first = req("r0", [1, 2, 3, 4], tokens=72)
    index.record_placement("a", first)
    second = req("r1", [1, 2, 3, 4, 5, 6], tokens=100)
    index.record_placement("a", second)
    assert index.placed_hit_tokens == 4 * B
    assert index.hit_rate == pytest.approx(4 * B / 172)
    reply = dataclasses.replace(
        second, prefix=PromptPrefix(B, (1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6, 7, 8))
    )
    index.record_completion("a", reply)
    assert index.matched_blocks("a", req("r2", [1, 2, 3, 4, 5, 6, 7, 8, 9])) == 8
    assert index.cached_tokens("a", req("r3", [1, 2], tokens=32)) == 31  # last token computed


# ---- the SLO-slack score -----------------------------------------------------------------------
def affinity(**cfg) -> PrefixAffinity:
    return PrefixAffinity(PrefixAffinityConfig(enabled=True, **cfg))


def warm(aff: PrefixAffinity, inst, blocks: list[int]) -> None:
    aff.record_placement(inst, req("warm", blocks))


LONG = list(range(1, 201))  # 200 blocks: 3,200 cached tokens save ~0.32 s of prefill


@pytest.mark.parametrize(
    ("pending", "ttft_s", "cfg", "expected"),
    [
        ((0, 0), 10.0, {}, "i1"),  # cached on i1, nobody busy: pin to i1
        ((0, 2000), 10.0, {}, "i1"),  # i1 busier, but the saving outweighs 0.2 s of queue
        ((0, 20000), 10.0, {}, None),  # 2 s of queue on i1 > saving: i0 scores better, no hit
        ((0, 20000), 10.0, {"benefit_weight": 10.0}, "i1"),  # saved prefill weighs 10x
        ((0, 2000), 0.25, {}, None),  # no replica within 0.8 x 0.25 s of slack: QLM decides
        ((0, 0), 10.0, {"min_saved_s": 1.0}, None),  # the saving is not distinctive enough
    ],
)
def test_scheduler_prefix_affinity_trades_saving_against_queue_and_slack(
    fakes, pending, ttft_s, cfg, expected
):
    insts = [fakes.instance(f"i{k}", pending_prefill_tokens=p) for k, p in enumerate(pending)]
    aff = affinity(**cfg)
    warm(aff, insts[1], LONG)
    r = req("r", [*LONG, 999], ttft_s=ttft_s)
    assert aff.choose(r, insts, 0.0) == expected


def running(n: int, context_tokens: int = 4000) -> list[WorkItem]:
    return [WorkItem(0.0, True, 0, context_tokens, 100) for _ in range(n)]


@pytest.mark.parametrize(
    ("decode_tokens", "busy", "expected"),
    [
        (0, 40, "i1"),  # TTFT alone: the longest cached history wins whatever runs there
        # 40 running on i1: its 50th token comes ~1 s after i2's, more than the 0.16 s saved
        (50, 40, "i2"),
        (50, 0, "i1"),  # no decode load anywhere: as TTFT alone
        (1, 40, "i1"),  # one token's worth of the load does not outweigh the saving
    ],
)
def test_scheduler_prefix_affinity_weighs_decode_load_against_saving(
    fakes, decode_tokens, busy, expected
):
    insts = [
        fakes.instance("i0"),
        fakes.instance("i1", running=busy, items=running(busy)),
        fakes.instance("i2"),
    ]
    aff = affinity(decode_tokens=decode_tokens)
    warm(aff, insts[1], LONG)  # the conversation's history
    warm(aff, insts[2], LONG[:100])  # its system prompt only
    r = req("r", [*LONG, 999])
    assert aff.choose(r, insts, 0.0) == expected
    scores = {s.replica: s for s in aff.scores(r, insts, 0.0)}
    tpot = predicted_ttft_tpot_s(insts[1], r)
    assert tpot is not None
    assert scores["i1"].tpot_s == (pytest.approx(tpot[1]) if decode_tokens else 0.0)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("disabled", None),
        ("no-prefix", None),
        ("cached-everywhere", None),  # a shared system prompt cached on every replica
        ("longest-wins", "i2"),
    ],
)
def test_scheduler_prefix_affinity_pins_only_distinctive_savings(fakes, case, expected):
    insts = [fakes.instance(f"i{k}") for k in range(3)]
    aff = PrefixAffinity(PrefixAffinityConfig(enabled=case != "disabled"))
    for inst in insts:
        warm(aff, inst, LONG[:100])
    if case == "longest-wins":
        warm(aff, insts[2], LONG)
    r = req("r", [*LONG, 999])
    if case == "no-prefix":
        r = dataclasses.replace(r, prefix=None)
    assert aff.choose(r, insts, 0.0) == expected


def test_scheduler_prefix_pinned_policy_pins_or_defers_and_learns_every_placement(fakes):
    insts = [fakes.instance(f"i{k}") for k in range(2)]
    policy = create_global_policy("qlm", {"prefix": {"enabled": True}})
    assert isinstance(policy, PrefixPinnedPolicy) and isinstance(policy.inner, QLMPolicy)
    rej = fakes.rejector()
    policy.on_arrival(req("a", LONG, t=0.0), insts, rej, 0.0)  # nothing cached: QLM places it
    placed_a = [i.name for i in insts if any(r.request_id == "a" for r in i.submitted)]
    assert len(placed_a) == 1
    assert policy.affinity.index.matched_blocks(placed_a[0], req("p", LONG)) == len(LONG)
    policy.on_arrival(req("b", [*LONG, 7], t=1.0), insts, rej, 1.0)  # pinned to a's replica
    placed_b = [i.name for i in insts if any(r.request_id == "b" for r in i.submitted)]
    assert placed_b == placed_a
    assert policy.affinity.pins == 1
    assert not rej.rejected


def test_scheduler_prefix_stack_options_validate():
    assert isinstance(create_global_policy("qlm", {}), QLMPolicy)
    assert isinstance(create_global_policy("qlm", {"prefix": {"enabled": False}}), QLMPolicy)
    with pytest.raises(ValueError, match="benefit_weight"):
        create_global_policy("qlm", {"prefix": {"enabled": True, "benefit_weight": -1}})
    with pytest.raises(ValueError, match="bogus"):
        create_global_policy("qlm", {"prefix": {"bogus": 1}})


# ---- prefix-only routing (the peers' approach) -------------------------------------------------
@pytest.mark.parametrize(
    ("cached", "loads", "expected"),
    [
        ({"i1": LONG}, [0, 9, 0], "i1"),  # longest cached prefix wins whatever the load
        ({"i1": LONG[:50], "i2": LONG}, [0, 0, 0], "i2"),
        ({}, [3, 1, 2], "i1"),  # nothing cached: least loaded
        ({"i0": LONG, "i2": LONG}, [5, 0, 1], "i2"),  # tie on prefix: least loaded of them
    ],
)
def test_scheduler_prefix_only_router(fakes, cached, loads, expected):
    insts = [fakes.instance(f"i{k}", running=n) for k, n in enumerate(loads)]
    router = ROUTERS.create("prefix-only")
    for k, inst in enumerate(insts):
        router.index.set_capacity(inst.name, 10**5)
        if inst.name in cached:
            router.index.record_placement(inst.name, req(f"w{k}", cached[inst.name]))
    chosen = router.choose(req("r", [*LONG, 5]), insts, 0.0)
    assert chosen.name == expected
    assert router.index.matched_blocks(expected, req("p", [*LONG, 5])) == len(LONG) + 1


def test_scheduler_prefix_only_keeps_a_conversation_on_one_replica(fakes):
    insts = [fakes.instance(f"i{k}") for k in range(3)]
    policy = RoutingPolicy(ROUTERS.create("prefix-only"))
    history: list[int] = []
    for turn in range(5):
        history = history + [100 * turn + j for j in range(1, 6)]
        policy.on_arrival(req(f"t{turn}", history), insts, fakes.rejector(), float(turn))
    holders = [i.name for i in insts if i.submitted]
    assert len(holders) == 1


def test_scheduler_prefix_placement_without_a_hardware_profile(fakes):
    """A live replica of a model outside the catalogue has no profile: fallback rates apply."""

    class NoProfile(type(fakes.instance("x"))):
        def profile(self, model):
            raise ValueError("no hardware profile")

    insts = [NoProfile(f"i{k}") for k in range(2)]
    aff = affinity(fallback_prefill_tokens_s=1000.0, decode_tokens=50)
    warm(aff, insts[1], LONG)
    scores = {s.replica: s for s in aff.scores(req("r", [*LONG, 999]), insts, 0.0)}
    assert scores["i1"].saved_s == pytest.approx(3200 / 1000.0)
    assert scores["i1"].tpot_s == 0.0  # no decode model: no load term
    assert aff.choose(req("r", [*LONG, 999]), insts, 0.0) == "i1"
    router = ROUTERS.create("prefix-only")
    assert router.choose(req("r", LONG), insts, 0.0).name == "i0"
