"""LoRA-adapter-aware placement: the adapter index (what replicas report loaded, and what was
placed since; LRU within the slots), the score trading
affinity against slack (a table of cases), the pinned policy planning an adapter load as a
cheap swap and learning every placement, and the `rwt-adapter` placer plugin."""

from __future__ import annotations

import pytest

from services.scheduler.core.adapter_affinity import (
    AdapterAffinity,
    AdapterAffinityConfig,
    AdapterIndex,
)
from services.scheduler.core.adapter_pinning import AdapterPinnedPolicy
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.prefix_pinning import PrefixPinnedPolicy
from shared.domain import SLO, Request


def req(rid: str, adapter: str | None, ttft_s: float = 10.0, t: float = 0.0) -> Request:
    return Request(rid, "m", 100, 50, t, SLO(ttft_s), true_output_tokens=20, adapter=adapter)


def test_scheduler_adapter_index_is_lru_within_the_slots() -> None:
    index = AdapterIndex(slots=2)
    for adapter in ("a", "b", "a", "c"):  # a touched again: b is the least recently used
        index.record("r0", adapter)
    assert index.adapters("r0") == ["a", "c"]
    assert index.holds("r0", "a") and not index.holds("r0", "b") and not index.holds("r1", "a")
    index.drop_replica("r0")
    assert index.adapters("r0") == []


def test_scheduler_adapter_index_takes_what_replicas_report() -> None:
    index = AdapterIndex(slots=2)
    index.observe("r0", ("a", "b"))
    assert index.adapters("r0") == ["a", "b"]
    index.record("r0", "c")  # placed: r0 loads c, unloading a (least recently used)
    index.observe("r0", ("a", "b"))  # the same report again: c is still on its way
    assert index.adapters("r0") == ["b", "c"]
    index.observe("r0", ("d",))  # a new report is the truth: what was placed is settled
    assert index.adapters("r0") == ["d"] and not index.holds("r0", "c")


def test_scheduler_adapter_affinity_reads_the_replicas_loaded_adapters(fakes) -> None:
    insts = [fakes.instance("i0"), fakes.instance("i1", loaded_adapters=("sql",))]
    aff = AdapterAffinity(AdapterAffinityConfig(enabled=True))  # nothing placed yet
    best = aff.choose(req("r", "sql"), insts, 0.0)
    assert best is not None and (best.replica, best.loaded) == ("i1", True)
    insts[1].loaded_adapters = ("poem",)  # i1 unloaded sql since: loaded nowhere now
    assert aff.choose(req("r2", "sql"), insts, 0.0) is None


# pending prefill tokens per replica (the fakes prefill 10,000 tokens/s: 10,000 tokens is 1 s
# of queue; the request's own 100 tokens 0.02 s), which replicas hold the adapter, the
# request's TTFT objective, config -> the choice (None: the wrapped SLO policy decides) and
# whether it loads the adapter there (defaults: one slot, a load 0.05 s, an eviction 0.2 s
# more; i0 holds another adapter unless it holds this one, so loading there evicts it)
@pytest.mark.parametrize(
    ("pending", "holders", "ttft_s", "cfg", "expected", "load"),
    [
        ((0, 0), ("i1",), 10.0, {}, "i1", False),  # loaded on i1, both idle: affinity wins
        ((0, 1000), ("i1",), 10.0, {}, "i1", False),  # i1 0.1 s busier: a load costs more
        ((0, 50000), ("i1",), 10.0, {}, "i0", True),  # i1 5 s busy: load on idle i0 instead
        ((0, 50000), ("i1",), 2.0, {}, "i0", True),  # only i0 meets 0.8 x 2 s: it loads
        ((0, 1000), ("i1",), 10.0, {"swap_penalty_s": 0.0, "load_s": 0.0}, "i0", True),  # free
        ((0, 50000), ("i1",), 10.0, {"swap_penalty_s": 10.0}, "i1", False),  # evictions dear
        ((50000, 50000), ("i1",), 2.0, {}, None, False),  # no slack anywhere: QLM decides
        ((0, 0), (), 10.0, {}, None, False),  # loaded nowhere: the choice does not matter
        ((0, 0), ("i0", "i1"), 10.0, {}, None, False),  # loaded everywhere: nor here
    ],
)
def test_scheduler_adapter_affinity_trades_affinity_against_slack(
    fakes, pending, holders, ttft_s, cfg, expected, load
) -> None:
    insts = [fakes.instance(f"i{k}", pending_prefill_tokens=p) for k, p in enumerate(pending)]
    aff = AdapterAffinity(AdapterAffinityConfig(enabled=True, **cfg))
    aff.record_placement("i0", req("other", "poem"))
    for name in holders:
        aff.record_placement(name, req("warm", "sql"))
    best = aff.choose(req("r", "sql", ttft_s=ttft_s), insts, 0.0)
    assert (best.replica if best else None) == expected
    if best is not None:
        assert best.loaded is not load


@pytest.mark.parametrize("case", ["disabled", "no-adapter"])
def test_scheduler_adapter_affinity_leaves_other_requests_alone(fakes, case) -> None:
    insts = [fakes.instance("i0"), fakes.instance("i1")]
    aff = AdapterAffinity(AdapterAffinityConfig(enabled=case != "disabled"))
    aff.record_placement("i0", req("warm", "sql"))
    assert aff.choose(req("r", None if case == "no-adapter" else "sql"), insts, 0.0) is None


def test_scheduler_adapter_pinned_policy_keeps_affinity_and_plans_loads(fakes) -> None:
    insts = [fakes.instance(f"i{k}") for k in range(2)]
    policy = create_global_policy("qlm", {"adapter": {"enabled": True, "slots": 1}})
    assert isinstance(policy, AdapterPinnedPolicy)
    out = fakes.rejector()
    policy.on_arrival(req("a", "sql"), insts, out, 0.0)  # loaded nowhere: QLM places it
    where_a = [i.name for i in insts if any(r.request_id == "a" for r in i.submitted)]
    assert len(where_a) == 1 and policy.affinity.index.adapters(where_a[0]) == ["sql"]
    policy.on_arrival(req("b", "sql", t=0.1), insts, out, 0.1)  # pinned with a
    where_b = [i.name for i in insts if any(r.request_id == "b" for r in i.submitted)]
    assert where_b == where_a and policy.affinity.pins == 1
    assert not out.build().swaps  # held there: no load planned
    busy = next(i for i in insts if i.name == where_a[0])
    busy.pending_prefill_tokens = 80_000  # 8 s of queue: sql's replica misses c's deadline
    policy.on_arrival(req("c", "sql", ttft_s=2.0, t=0.2), insts, out, 0.2)
    swaps = out.build().swaps
    other = next(i.name for i in insts if i.name != where_a[0])
    assert [(s.instance, s.kind, s.model, s.adapter) for s in swaps] == [
        (other, "load", "m", "sql")
    ]
    assert [r.request_id for r in next(i for i in insts if i.name == other).submitted] == ["c"]
    assert policy.affinity.loads == 1 and not out.rejected


def test_scheduler_rwt_adapter_placer_plugin_resolves_to_both_affinities() -> None:
    from slomesh.stacks import load_stack

    stack = load_stack("slomesh-adapters")
    assert stack.stages["placer"].plugin == "rwt-adapter"
    policy = stack.global_policy()
    assert isinstance(policy, AdapterPinnedPolicy)
    assert isinstance(policy.inner, PrefixPinnedPolicy)
    with pytest.raises(ValueError, match="bogus"):
        create_global_policy("qlm", {"adapter": {"bogus": 1}})


def test_scheduler_shell_keeps_the_adapters_a_replica_reports() -> None:
    import asyncio

    from shared.rpc.slomesh.v1 import common_pb2
    from tests.unit.scheduler.test_scheduler_readiness import _scheduler

    async def run() -> tuple[str, ...]:
        sched, _ = _scheduler(up=set())
        ref = common_pb2.ReplicaRef(application="replica-0", gpu="A100-80GB")
        sched.UpdateReplica(common_pb2.ReplicaState(replica=ref, loaded_adapters=["sql", "poem"]))
        return sched.core.replicas["replica-0"].status().loaded_adapters

    assert asyncio.run(run()) == ("sql", "poem")
