"""Bands, tenant fairness and shedding inside the `qlm` policy, on fake instances: which group a
replica pulls next, what is shed at arrival and from the queue."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from services.predictor.core.registry import create_predictor
from services.scheduler.core.fairness.config import TenancyConfig
from services.scheduler.core.fairness.selector import GroupSelector
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.policy import QLMPolicy
from shared.domain import SLO, Request

SLO60 = SLO(60.0, class_name="batch-1")
SLO5 = SLO(5.0, class_name="tight")


def req(
    rid: str,
    tenant: str = "a",
    at: float = 0.0,
    n_in: int = 100,
    criticality: int = 0,
    slo: SLO = SLO60,
) -> Request:
    return Request(
        rid, "m", n_in, 64, at, slo, tenant=tenant, true_output_tokens=32, criticality=criticality
    )


def policy(**tenancy: object) -> QLMPolicy:
    cfg = {"lengths": "true", "reject_over_slo_factor": None, "pull_window_requests": 4}
    return QLMPolicy(
        QLMConfig.model_validate(cfg | {"tenancy": tenancy}),
        predictor=create_predictor("online-histogram"),
    )


@dataclass(frozen=True)
class G:
    tenant: str
    criticality: int = 0


@pytest.mark.parametrize(
    ("bands", "fairness", "counters", "groups", "expected"),
    [
        # bands: the most critical band present wins, wherever it sits in the queue
        (True, "off", {}, [G("a", 0), G("b", 1), G("c", -1)], 1),
        (False, "off", {}, [G("a", 0), G("b", 1), G("c", -1)], 0),
        # VTC inside the band: the tenant with the smallest counter, its first group
        (True, "vtc", {"a": 500.0, "b": 100.0}, [G("a"), G("b"), G("b")], 1),
        (True, "vtc", {"a": 50.0, "b": 100.0}, [G("a"), G("b"), G("a")], 0),
        # VTC never crosses bands: b's smaller counter does not beat a's higher band
        (True, "vtc", {"a": 500.0, "b": 100.0}, [G("b", 0), G("a", 2)], 1),
        (True, "off", {"a": 500.0, "b": 100.0}, [G("a"), G("b")], 0),
    ],
)
def test_selector_bands_then_tenant_counter(
    bands: bool, fairness: str, counters: dict[str, float], groups: list[G], expected: int
) -> None:
    sel = GroupSelector(TenancyConfig.model_validate({"bands": bands, "fairness": fairness}))
    sel.vtc.counters.update(counters)
    assert sel.choose(groups) is groups[expected]
    assert sel.choose([]) is None


def _queue_two_tenants(p: QLMPolicy, fakes):
    inst = fakes.instance("i0", waiting=4)  # engine window full: everything stays queued
    rej = fakes.rejector()
    for k in range(6):  # the heavy tenant's long prompts come first
        p.on_arrival(req(f"h{k}", "heavy", 0.01 * k, n_in=1000), [inst], rej, 0.01 * k)
    for k in range(3):
        p.on_arrival(req(f"l{k}", "light", 0.1 + 0.01 * k, n_in=100), [inst], rej, 0.1)
    inst.waiting = 0
    p.on_step_end(inst, rej, 0.5)
    return [r.request_id for r in inst.submitted], rej


@pytest.mark.parametrize(
    ("fairness", "expected"),
    [
        # VTC: after h0 (1032 tokens) the light tenant (132 each) goes until it catches up
        ("vtc", ["h0", "l0", "l1", "l2"]),
        # off: the virtual queue's deadline order, i.e. FCFS across tenants
        ("off", ["h0", "h1", "h2", "h3"]),
    ],
)
def test_qlm_pulls_by_tenant_counter(fakes, fairness: str, expected: list[str]) -> None:
    p = policy(fairness=fairness)
    got, rej = _queue_two_tenants(p, fakes)
    assert got == expected and rej.rejected == []
    if fairness == "vtc":  # dispatch charged input + predicted output
        assert p.selector.vtc.counters["light"] == pytest.approx(3 * 132 + 0.0)


def test_qlm_finish_corrects_the_counter_to_actual_output(fakes) -> None:
    p = policy()
    inst = fakes.instance("i0")
    p.on_arrival(req("r", "a"), [inst], fakes.rejector(), 0.0)
    assert p.selector.vtc.counters["a"] == pytest.approx(132.0)  # 100 in + 32 predicted
    p.on_finish(inst.submitted[0], "i0", 10, fakes.rejector(), 1.0)
    assert p.selector.vtc.counters["a"] == pytest.approx(110.0)


@pytest.mark.parametrize(("bands", "first"), [(True, "crit"), (False, "shed0")])
def test_qlm_strict_bands_at_pull(fakes, bands: bool, first: str) -> None:
    p = policy(bands=bands, shed=False)
    inst = fakes.instance("i0", waiting=4)
    rej = fakes.rejector()
    # sheddable work queued first (earlier deadline), critical work later
    p.on_arrival(req("shed0", "s", 0.0, criticality=-1), [inst], rej, 0.0)
    p.on_arrival(req("crit", "c", 1.0, criticality=1), [inst], rej, 1.0)
    inst.waiting = 3
    p.on_step_end(inst, rej, 1.5)
    assert [r.request_id for r in inst.submitted] == [first]


@pytest.mark.parametrize(
    ("criticality", "shed", "rejected"),
    [(-1, True, True), (0, True, False), (-1, False, False)],
)
def test_qlm_sheds_a_sheddable_arrival_when_the_backlog_is_past_its_slo(
    fakes, criticality: int, shed: bool, rejected: bool
) -> None:
    p = policy(shed=shed)
    inst = fakes.instance("i0", waiting=4)
    rej = fakes.rejector()
    for k in range(400):  # a long backlog of standard work
        p.on_arrival(req(f"b{k}", "a", 0.0, n_in=2000), [inst], rej, 0.0)
    assert p.estimator.backlog_s("i0", 0.0) > SLO5.ttft_deadline_s
    p.on_arrival(req("x", "s", 0.0, criticality=criticality, slo=SLO5), [inst], rej, 0.0)
    assert ("x" in [r for r, _, _ in rej.rejected]) == rejected
    if rejected:
        assert "shed: sheddable" in rej.rejected[-1][1]
        assert p.shedding.at_arrival == 1


def test_qlm_drops_queued_sheddable_work_when_critical_work_is_late(fakes) -> None:
    p = policy(shed_backlog_factor=1e9)  # let sheddable work in, to be dropped later
    inst = fakes.instance("i0", waiting=4)
    rej = fakes.rejector()
    for k in range(3):
        p.on_arrival(req(f"s{k}", "s", 0.0, criticality=-1), [inst], rej, 0.0)
    for k in range(400):  # critical work that cannot start within its 5 s SLO
        p.on_arrival(req(f"c{k}", "c", 0.0, n_in=2000, criticality=1, slo=SLO5), [inst], rej, 0.0)
    shed = [r for r, reason, _ in rej.rejected if "dropped from the queue" in reason]
    assert shed == ["s0", "s1", "s2"]
    assert all(not r.startswith("c") for r, _, _ in rej.rejected)
    assert p.shedding.from_queue == 3 and p.grouper.group_of("s0") is None
    assert p.selector.vtc.active == ["c"]  # the shed tenant left the active set


@pytest.mark.parametrize(
    ("bands", "fairness", "arrivals", "contended"),
    [
        (True, "vtc", [("a", 0), ("a", 0)], False),  # one tenant, one band: nothing to choose
        (True, "vtc", [("a", 0), ("b", 0)], True),  # two tenants share the band
        (True, "off", [("a", 0), ("b", 0)], False),
        (True, "off", [("a", 0), ("a", -1)], True),  # two bands
        (False, "off", [("a", 0), ("b", -1)], False),
    ],
)
def test_selector_contended_when_bands_or_tenants_differ(
    bands: bool, fairness: str, arrivals: list[tuple[str, int]], contended: bool
) -> None:
    """QLM's direct dispatch of tight classes bypasses the virtual queues: it is skipped once
    there is a band or tenant choice to make."""
    sel = GroupSelector(TenancyConfig.model_validate({"bands": bands, "fairness": fairness}))
    got = [sel.contended(req(f"r{k}", t, criticality=c)) for k, (t, c) in enumerate(arrivals)]
    assert got == [False, contended]


@pytest.mark.parametrize(("tenants", "expired"), [(("a", "b"), ["x0", "x1"]), (("a", "a"), [])])
def test_qlm_expires_late_queued_work_when_tenants_share(
    fakes, tenants: tuple[str, str], expired: list[str]
) -> None:
    """With several tenants a request that can no longer start in time is answered, not served
    late (as the live admission core does); one tenant keeps QLM's own behaviour."""
    p = policy()
    inst = fakes.instance("i0", waiting=4)
    rej = fakes.rejector()
    for k, t in enumerate(tenants):
        p.on_arrival(req(f"x{k}", t, 0.0, slo=SLO5), [inst], rej, 0.0)
    p.on_step_end(inst, rej, 4.0)  # before the deadline: nothing expires
    assert rej.rejected == []
    p.on_step_end(inst, rej, 5.5)
    assert [r for r, _, _ in rej.rejected] == expired
    assert all("cannot be met from the queue" in reason for _, reason, _ in rej.rejected)
