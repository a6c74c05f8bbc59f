"""llm-d's flow control and latency-SLO admitter in front of a router (core/flow_control.py,
core/latency_slo_admitter.py)."""

from __future__ import annotations

import dataclasses

import pytest

from services.scheduler.core.cluster_view import WorkItem
from services.scheduler.core.flow_control import FlowControlConfig, FlowControlPolicy, saturation
from services.scheduler.core.latency_slo_admitter import LatencySLOAdmitter
from services.scheduler.core.routers import ROUTERS
from shared.domain import SLO


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        ([(0, 0), (0, 0)], 0.0),
        ([(5, 0), (0, 0)], 0.5),  # one pod at its queue threshold of 5
        ([(0, 80), (10, 0)], 1.5),  # KV 0.8/0.8 = 1; queue 10/5 = 2
        ([(1, 40)], 0.5),  # max(1/5, 0.4/0.8)
    ],
)
def test_saturation(fakes, pods, want) -> None:
    insts = [
        fakes.instance(f"i{k}", waiting=w, kv_used_blocks=kv) for k, (w, kv) in enumerate(pods)
    ]
    assert saturation(insts, FlowControlConfig()) == pytest.approx(want)


def _req(fakes, rid, arrival, ttft_s, criticality=0):
    return dataclasses.replace(
        fakes.request(rid, arrival=arrival), slo=SLO(ttft_s), criticality=criticality
    )


def test_flow_control_holds_while_saturated_then_serves_bands_and_deadlines(fakes) -> None:
    inst = fakes.instance("i0", waiting=5, running=1)  # saturation 1.0: hold everything
    policy = FlowControlPolicy(ROUTERS.create("least-loaded"), FlowControlConfig())
    rej = fakes.rejector()
    reqs = [
        _req(fakes, "late-deadline", 0.0, 30.0),
        _req(fakes, "early-deadline", 0.1, 2.0),
        _req(fakes, "sheddable", 0.2, 1.0, criticality=-1),
        _req(fakes, "critical", 0.3, 60.0, criticality=1),
    ]
    for r in reqs:
        policy.on_arrival(r, [inst], rej, r.arrival_s)
    assert inst.submitted == []
    order = []
    for t in range(4):
        inst.waiting = 4  # room for one: 5/5 after the dispatch
        policy.on_step_end(inst, rej, 1.0 + t)
        order += [r.request_id for r in inst.submitted[len(order) :]]
    # highest band first, then the earliest SLO deadline, the sheddable band last
    assert order == ["critical", "early-deadline", "late-deadline", "sheddable"]
    assert rej.rejected == []


def test_flow_control_expires_after_ttl(fakes) -> None:
    inst = fakes.instance("i0", waiting=9, running=1)
    policy = FlowControlPolicy(ROUTERS.create("round-robin"), FlowControlConfig(request_ttl_s=5.0))
    rej = fakes.rejector()
    policy.on_arrival(fakes.request("r", arrival=0.0), [inst], rej, 0.0)
    policy.on_step_end(inst, rej, 4.9)
    assert rej.rejected == []
    policy.on_step_end(inst, rej, 5.0)
    assert [r[0] for r in rej.rejected] == ["r"] and "TTL" in rej.rejected[0][1]


def test_flow_control_dispatches_to_an_idle_pool(fakes) -> None:
    inst = fakes.instance("i0", kv_used_blocks=95)  # KV full of cached blocks, no work
    policy = FlowControlPolicy(ROUTERS.create("round-robin"), FlowControlConfig())
    policy.on_arrival(fakes.request("r"), [inst], fakes.rejector(), 0.0)
    assert [r.request_id for r in inst.submitted] == ["r"]


def _busy(fakes, name, prompt_tokens_waiting, kv=50):
    items = [WorkItem(99.0, False, prompt_tokens_waiting, prompt_tokens_waiting, 10)]
    items.append(WorkItem(99.0, True, 0, 100, 10))
    return fakes.instance(name, running=1, waiting=1, kv_used_blocks=kv, items=items)


@pytest.mark.parametrize(
    ("criticality", "ttft_s", "backlog", "kv", "rejected"),
    [
        (-1, 0.5, 100_000, 50, True),  # sheddable, 10 s of prefill ahead everywhere
        (0, 0.5, 100_000, 50, False),  # not sheddable: never rejected
        (-1, 60.0, 100_000, 50, False),  # the SLO is loose enough
        (-1, 0.5, 100, 50, False),  # a short backlog meets it
        (-1, 0.5, 100_000, 1, False),  # cold endpoint (KV < 2%): predictions not trusted
    ],
)
def test_latency_slo_admitter(fakes, criticality, ttft_s, backlog, kv, rejected) -> None:
    insts = [_busy(fakes, "a", backlog, kv), _busy(fakes, "b", backlog, kv)]
    req = _req(fakes, "r", 0.0, ttft_s, criticality=criticality)
    why = LatencySLOAdmitter().rejection(req, insts)
    assert (why is not None) == rejected
    if rejected:
        assert "latency SLO" in why


def test_latency_slo_admitter_admits_when_a_replica_is_idle(fakes) -> None:
    insts = [_busy(fakes, "a", 100_000), fakes.instance("idle", kv_used_blocks=50)]
    req = _req(fakes, "r", 0.0, 0.5, criticality=-1)
    assert LatencySLOAdmitter().rejection(req, insts) is None
