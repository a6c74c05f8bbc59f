"""The simulator's shard model (slomesh/sim/shards.py): one shard at no cost is the plain
simulator; a shard's decisions wait for its CPU (a queue forms past 1/cost); each shard places
only on the instances it owns; shards exchange tenant usage so each counter holds the
others' charges."""

from __future__ import annotations

from shared.workloads import LengthSpec, StreamSpec, WorkloadSpec, generate
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.shards import ShardedSimulator, ShardModel
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

CLUSTER = ClusterSpec(instances=[InstanceSpec(gpu="H100-80GB", models=["llama-3.1-8b"], count=4)])


def _requests(rate: float, n: int = 160, tenants: tuple[str, ...] = ("a",)) -> list:
    lengths = LengthSpec(source="fixed", input_tokens=32, output_tokens=4, max_tokens=16)
    streams = [
        StreamSpec(
            name=t,
            slo_class="interactive",
            models=["llama-3.1-8b"],
            rate_rps=rate / len(tenants),
            lengths=lengths,
            tenant=t,
        )
        for t in tenants
    ]
    return generate(WorkloadSpec(streams=streams, requests=n), 0)


def test_one_shard_at_no_cost_is_the_plain_simulator() -> None:
    reqs = _requests(50.0)
    plain = Simulator(CLUSTER, STACKS.create("slomesh"), reqs).run()
    sharded = ShardedSimulator(CLUSTER, STACKS.create("slomesh"), reqs, ShardModel()).run()
    key = [(r.request_id, r.instance, r.first_token_s, r.finish_s) for r in plain.records]
    assert [(r.request_id, r.instance, r.first_token_s, r.finish_s) for r in sharded.records] == key


def test_decisions_wait_for_the_shards_cpu() -> None:
    cost = ShardModel(admit_cost_ms=10.0)  # 100 decisions/s at most
    under = ShardedSimulator(CLUSTER, STACKS.create("slomesh"), _requests(50.0), cost)
    under.run()
    over = ShardedSimulator(CLUSTER, STACKS.create("slomesh"), _requests(200.0), cost)
    over.run()
    assert min(under.cpu.admission_delays_s) >= 0.010 - 1e-12
    assert max(under.cpu.admission_delays_s) < 0.1
    # past capacity the queue grows: the last arrivals wait most of the overload
    assert max(over.cpu.admission_delays_s) > 0.3
    two = ShardedSimulator(
        CLUSTER,
        STACKS.create("slomesh"),
        _requests(200.0),
        ShardModel(shards=2, admit_cost_ms=10.0),
    )
    two.run()
    assert max(two.cpu.admission_delays_s) < max(over.cpu.admission_delays_s)


def test_each_shard_places_only_on_its_own_instances() -> None:
    sim = ShardedSimulator(CLUSTER, STACKS.create("slomesh"), _requests(80.0), ShardModel(shards=2))
    result = sim.run()
    assert sorted(len(s) for s in sim.subsets) == [2, 2]
    used = {r.instance for r in result.records if r.instance}
    assert used == {name for sub in sim.subsets for name in sub}
    for core, sub in zip(sim.cores, sim.subsets, strict=True):
        assert set(core.views) == set(sub)  # a shard's policy sees only its own instances
    assert len(result.records) == 160


def test_shards_exchange_tenant_usage() -> None:
    reqs = _requests(400.0, 200, ("a", "b"))
    sim = ShardedSimulator(
        ClusterSpec(instances=[InstanceSpec(gpu="A100-80GB", models=["llama-3.1-8b"], count=2)]),
        STACKS.create("slomesh"),
        reqs,
        ShardModel(shards=2, exchange_interval_ms=50.0),
    )
    sim.run()
    vtcs = [c.policy.selector.vtc for c in sim.cores]
    for mine, peer in ((vtcs[0], vtcs[1]), (vtcs[1], vtcs[0])):
        for tenant, own in mine.charged.items():
            if peer.charged.get(tenant, 0.0) > 0:
                assert mine.counters[tenant] > own  # the peer's charges were absorbed
    assert 0.0 < sim.cpu.max_staleness_s <= 0.05 + 1e-9
