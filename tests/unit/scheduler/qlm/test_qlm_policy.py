"""The `qlm` global policy on fake instances: pulling, eviction order, resume, swap tiers,
instance loss and handover to another shard, predicted infeasibility. Hand-checkable cases;
no engine behind the fakes."""

from __future__ import annotations

import pytest

from services.predictor.core.registry import create_predictor
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.policy import QLMPolicy
from shared.domain import SLO, Request

INTERACTIVE = SLO(20.0, class_name="interactive")
BATCH1 = SLO(60.0, class_name="batch-1")
BATCH2 = SLO(3600.0, class_name="batch-2")


def req(rid: str, slo: SLO = BATCH2, model: str = "m", at: float = 0.0, n_in: int = 100) -> Request:
    return Request(rid, model, n_in, 64, at, slo, true_output_tokens=32)


def policy(**cfg: object) -> QLMPolicy:
    base: dict[str, object] = {"lengths": "true", "reject_over_slo_factor": None}
    return QLMPolicy(
        QLMConfig.model_validate(base | cfg), predictor=create_predictor("online-histogram")
    )


def ids(requests: list[Request]) -> list[str]:
    return [r.request_id for r in requests]


def test_qlm_pulls_head_group_fcfs_up_to_the_engine_window(fakes):
    inst = fakes.instance("i0")
    p = policy(pull_window_requests=3)
    rej = fakes.rejector()
    inst.waiting = 3  # engine full: arrivals stay in the virtual queue
    for k in range(5):
        p.on_arrival(req(f"r{k}", at=0.1 * k), [inst], rej, 0.1 * k)
    assert inst.submitted == [] and len(p.grouper) == 5
    inst.waiting = 1  # two seats free in the window
    p.on_step_end(inst, rej, 1.0)
    assert ids(inst.submitted) == ["r0", "r1"]
    assert len(p.grouper) == 3


def test_qlm_tighter_group_goes_ahead_of_queued_batch_work(fakes):
    inst = fakes.instance("i0", waiting=4)
    p = policy(pull_window_requests=4)
    rej = fakes.rejector()
    p.on_arrival(req("b0", BATCH2, at=0.0), [inst], rej, 0.0)
    p.on_arrival(req("b1", BATCH1, at=1.0), [inst], rej, 1.0)
    p.on_arrival(req("i0", INTERACTIVE, at=2.0), [inst], rej, 2.0)
    order = [p.grouper.group(g).slo_class for g in p.vqs.order("i0")]
    assert order == ["interactive", "batch-1", "batch-2"]  # deadline order: 22 s, 61 s, 3600 s
    inst.waiting = 1
    p.on_step_end(inst, rej, 2.5)
    assert ids(inst.submitted) == ["i0", "b1", "b0"]


def _full_instance_with_batch_work(fakes, p: QLMPolicy):
    inst = fakes.instance("i0", kv_tokens=10**6)
    rej = fakes.rejector()
    # pulled in this order: b2-old (batch-2), b1 (batch-1), b2-new (batch-2)
    pulled = [("b2-old", BATCH2, 100.0), ("b1", BATCH1, 101.0), ("b2-new", BATCH2, 102.0)]
    for rid, slo, t in pulled:
        p.on_arrival(req(rid, slo, at=t, n_in=400), [inst], rej, t)
    assert ids(inst.submitted) == ["b2-old", "b1", "b2-new"]
    inst.waiting, inst.kv_used_blocks = p.cfg.pull_window_requests, 95  # no room left
    return inst, rej


def test_qlm_evicts_loosest_most_recent_first_when_a_tight_head_is_urgent(fakes):
    p = policy(pull_window_requests=3)
    inst, rej = _full_instance_with_batch_work(fakes, p)
    # delivered late: its deadline (103.1 s) is closer than the time a seat takes to free up
    # it needs 700 + 32 KV tokens; each victim frees 400 + 32: two batch-2 victims suffice
    p.on_arrival(req("hot", INTERACTIVE, at=83.1, n_in=700), [inst], rej, 103.0)
    assert inst.evicted_ids == ["b2-new", "b2-old"]  # batch-2 before batch-1, newest first
    assert "hot" in ids(inst.submitted)


def test_qlm_no_eviction_when_the_head_has_slack_or_evict_is_off(fakes):
    for cfg, at in [({}, 103.0), ({"lso": {"evict": False}}, 83.1)]:
        p = policy(pull_window_requests=3, **cfg)
        inst, rej = _full_instance_with_batch_work(fakes, p)
        p.on_arrival(req("hot", INTERACTIVE, at=at), [inst], rej, 103.0)
        assert inst.evicted_ids == []
        assert "hot" not in ids(inst.submitted)


def test_qlm_resumes_evicted_in_deadline_order_once_no_tighter_head_waits(fakes):
    p = policy(pull_window_requests=3)
    inst, rej = _full_instance_with_batch_work(fakes, p)
    p.on_arrival(req("hot", INTERACTIVE, at=83.1, n_in=400), [inst], rej, 103.0)
    evicted = list(inst.evicted_ids)
    inst.waiting, inst.kv_used_blocks = 0, 10
    p.on_step_end(inst, rej, 104.0)
    by_deadline = sorted(evicted, key=lambda r: {"b2-old": 3700.0, "b2-new": 3702.0}.get(r, 161))
    assert inst.resumed_ids == by_deadline


@pytest.mark.parametrize(("swap", "expected"), [(True, ["b", "c"]), (False, [])])
def test_qlm_keeps_the_next_models_of_the_queue_warm_in_order(fakes, swap, expected):
    inst = fakes.instance("i0", models=("a", "b", "c"), active_model="a", waiting=9)
    p = policy(lso={"swap": swap})
    rej = fakes.rejector()
    for k, (model, slo) in enumerate([("a", INTERACTIVE), ("b", BATCH1), ("c", BATCH2)]):
        p.on_arrival(req(f"r{k}", slo, model=model, at=float(k)), [inst], rej, float(k))
    models = [p.grouper.group(g).model for g in p.vqs.order("i0")]
    assert models == ["a", "b", "c"]
    assert inst.prewarmed[-len(expected) :] == expected if expected else inst.prewarmed == []


def test_qlm_instance_loss_returns_its_groups_and_unfinished_requests(fakes):
    a, b = fakes.instance("a", waiting=0), fakes.instance("b", waiting=0)
    p = policy(pull_window_requests=2)
    rej = fakes.rejector()
    for k in range(4):  # pulled: two each, round the least-backlog queues
        p.on_arrival(req(f"p{k}", at=0.01 * k, n_in=100 + 3000 * (k % 2)), [a, b], rej, 0.0)
    a.waiting = b.waiting = 2
    for k in range(6):  # queued
        p.on_arrival(req(f"q{k}", at=1 + 0.01 * k, n_in=100 + 3000 * (k % 2)), [a, b], rej, 1.0)
    on_b = [r.request_id for r in b.submitted]
    assert on_b and len(p.grouper) == 6
    p.on_finish(b.submitted[0], "b", 32, rej, 2.0)  # one of b's requests completed before the loss
    p.on_instance_lost("b", rej, 3.0)
    assert p.vqs.names() == ["a"]
    queued = {r.request_id for g in p.grouper.groups() for r, _ in g.queue}
    assert queued == {f"q{k}" for k in range(6)} | set(on_b[1:])
    assert all(p.vqs.queue_of(g.group_id) == "a" for g in p.grouper.groups())


def test_qlm_handover_keeps_what_the_instance_runs_and_moves_only_its_groups(fakes):
    a, b = fakes.instance("a", waiting=0), fakes.instance("b", waiting=0)
    p = policy(pull_window_requests=2)
    rej = fakes.rejector()
    for k in range(4):
        p.on_arrival(req(f"p{k}", at=0.01 * k, n_in=100 + 3000 * (k % 2)), [a, b], rej, 0.0)
    a.waiting = b.waiting = 2
    for k in range(6):
        p.on_arrival(req(f"q{k}", at=1 + 0.01 * k, n_in=100 + 3000 * (k % 2)), [a, b], rej, 1.0)
    on_b = [r.request_id for r in b.submitted]
    assert on_b
    p.on_instance_handed_over("b", rej, 3.0)  # another scheduler shard owns b from now on
    assert p.vqs.names() == ["a"]
    queued = {r.request_id for g in p.grouper.groups() for r, _ in g.queue}
    assert queued == {f"q{k}" for k in range(6)}  # b's requests run on there: not queued again
    assert all(p.vqs.queue_of(g.group_id) == "a" for g in p.grouper.groups())
    assert set(p.ops.placed["b"]) == set(on_b)
    p.on_finish(b.submitted[0], "b", 32, rej, 4.0)  # their finishes still come here
    assert set(p.ops.placed["b"]) == set(on_b[1:])


def test_qlm_handover_resumes_what_the_instance_holds_evicted(fakes):
    p = policy(pull_window_requests=3)
    inst, rej = _full_instance_with_batch_work(fakes, p)
    p.on_arrival(req("hot", INTERACTIVE, at=83.1, n_in=700), [inst], rej, 103.0)
    evicted = list(inst.evicted_ids)
    assert evicted
    p.on_instance_handed_over("i0", rej, 104.0)  # no pull here would ever resume them
    assert sorted(inst.resumed_ids) == sorted(evicted)


def test_qlm_rejects_predicted_infeasible_work_with_the_reason(fakes):
    inst = fakes.instance("i0", waiting=4, speed=0.001)  # a very slow instance
    p = QLMPolicy(QLMConfig.model_validate({"lengths": "true", "reject_over_slo_factor": 2.0}))
    rej = fakes.rejector()
    for k in range(40):
        p.on_arrival(req(f"r{k}", INTERACTIVE, at=0.0, n_in=2000), [inst], rej, 0.0)
    assert rej.rejected, "a queue far beyond the SLO must be answered with rejections"
    rid, reason, _ = rej.rejected[0]
    assert "exceeds 2x the 'interactive' SLO of 20s" in reason and "scale up" in reason
    assert p.stats.rejected_infeasible == len(rej.rejected)
    assert rid not in {r.request_id for g in p.grouper.groups() for r, _ in g.queue}


def test_qlm_rejects_a_model_no_instance_serves(fakes):
    p = policy()
    rej = fakes.rejector()
    p.on_arrival(req("x", model="other"), [fakes.instance("i0")], rej, 0.0)
    assert rej.rejected == [("x", "no instance serves model 'other'", 0.0)]
