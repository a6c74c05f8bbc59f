"""The virtual token counter (Sheng et al., OSDI '24): lift, charges, weights and the paper's
fairness properties on a serial server model (one request dispatched per step)."""

from __future__ import annotations

import random

import pytest

from services.scheduler.core.fairness.vtc import VirtualTokenCounter, VTCConfig


def _vtc(**cfg: object) -> VirtualTokenCounter:
    return VirtualTokenCounter(VTCConfig.model_validate(cfg))


@pytest.mark.parametrize(
    ("counters", "active", "newcomer", "expected"),
    [
        # a new tenant starts at the smallest counter of the active ones, not at 0
        ({"a": 500.0, "b": 300.0}, ["a", "b"], "c", 300.0),
        # a returning tenant with a higher counter keeps it (no lift down)
        ({"a": 500.0, "b": 300.0}, ["b"], "a", 500.0),
        # a returning tenant below the active minimum is lifted: idle time is no credit
        ({"a": 10.0, "b": 300.0}, ["b"], "a", 300.0),
    ],
)
def test_vtc_lifts_a_tenant_that_becomes_active(
    counters: dict[str, float], active: list[str], newcomer: str, expected: float
) -> None:
    v = _vtc()
    for t in active:
        v.enqueued(t)
    v.counters.update(counters)
    v.enqueued(newcomer)
    assert v.counters[newcomer] == expected


def test_vtc_with_nobody_active_lifts_to_the_last_tenant_that_left() -> None:
    v = _vtc()
    v.enqueued("a")
    v.charge_dispatch("r1", "a", 100, 50)
    v.dequeued("a")  # a leaves with counter 150
    v.enqueued("b")
    assert v.counters["b"] == 150.0
    assert v.active == ["b"]


@pytest.mark.parametrize(
    ("w_in", "w_out", "tenant_weight", "inp", "pred", "actual", "after_dispatch", "after_finish"),
    [
        (1.0, 1.0, 1.0, 100, 50.0, 80, 150.0, 180.0),  # finish corrects predicted -> actual
        (1.0, 2.0, 1.0, 100, 50.0, 20, 200.0, 140.0),  # w_q = 2 (the paper's experiments)
        (1.0, 1.0, 2.0, 100, 50.0, 50, 75.0, 75.0),  # weight 2: half the counter per token
    ],
)
def test_vtc_charges_input_plus_predicted_then_actual_output(
    w_in: float,
    w_out: float,
    tenant_weight: float,
    inp: int,
    pred: float,
    actual: int,
    after_dispatch: float,
    after_finish: float,
) -> None:
    v = _vtc(input_token_weight=w_in, output_token_weight=w_out)
    v.charge_dispatch("r", "a", inp, pred, tenant_weight)
    assert v.counters["a"] == pytest.approx(after_dispatch)
    v.charge_finish("r", actual)
    assert v.counters["a"] == pytest.approx(after_finish)
    assert v.served_tokens["a"] == pytest.approx(inp + actual)
    v.charge_finish("r", 999)  # a second finish of the same id changes nothing
    assert v.counters["a"] == pytest.approx(after_finish)


def test_vtc_refund_takes_back_a_dispatch_that_never_ran() -> None:
    v = _vtc()
    v.charge_dispatch("r", "a", 100, 50)
    v.refund("r", 100)
    assert v.counters["a"] == 0.0 and v.served_tokens["a"] == 0.0


def test_vtc_config_weights_override_the_request_weight() -> None:
    v = _vtc(weights={"gold": 4.0})
    v.charge_dispatch("r", "gold", 100, 100, request_weight=1.0)
    assert v.counters["gold"] == 50.0


def _serve(
    v: VirtualTokenCounter,
    arrivals: dict[int, list[tuple[str, int, int]]],
    steps: int,
) -> tuple[list[str], dict[int, int]]:
    """A serial server: each step, requests arriving at that step are queued, then the tenant
    with the smallest counter among those with queued work gets one request dispatched (with its
    true output as the prediction). Returns the tenant served at each step and, per step, how
    many requests were waiting."""
    queues: dict[str, list[tuple[int, int]]] = {}
    served: list[str] = []
    waiting: dict[int, int] = {}
    for step in range(steps):
        for tenant, inp, out in arrivals.get(step, []):
            queues.setdefault(tenant, []).append((inp, out))
            v.enqueued(tenant)
        waiting[step] = sum(len(q) for q in queues.values())
        tenant = v.pick([t for t, q in queues.items() if q])
        if tenant is None:
            served.append("")
            continue
        inp, out = queues[tenant].pop(0)
        v.dequeued(tenant)
        v.charge_dispatch(f"{step}", tenant, inp, out)
        v.charge_finish(f"{step}", out)
        served.append(tenant)
    return served, waiting


def test_vtc_backlogged_tenants_service_differs_by_at_most_2u() -> None:
    """Paper Theorem 4.4: two tenants backlogged throughout receive service within 2U of each
    other over any interval, U the largest single charge; here one sends long requests."""
    rng = random.Random(7)
    arrivals: dict[int, list[tuple[str, int, int]]] = {0: []}
    for _ in range(400):
        arrivals[0].append(("heavy", rng.randint(200, 800), rng.randint(100, 400)))
        arrivals[0].append(("light", rng.randint(10, 60), rng.randint(10, 60)))
    u = 800 + 400
    v = _vtc()
    served, _ = _serve(v, arrivals, 300)
    assert served.count("light") > 3 * served.count("heavy")  # equal tokens, not requests
    assert abs(v.served_tokens["heavy"] - v.served_tokens["light"]) <= 2 * u


def test_vtc_tenant_below_its_fair_share_is_served_as_it_comes() -> None:
    """A tenant whose demand is below its share never queues behind a backlogged one: each of
    its requests goes out within one dispatch of its arrival (it is lifted level with the
    backlogged tenant, and a tie may go either way; paper §4, the non-backlogged case)."""
    arrivals: dict[int, list[tuple[str, int, int]]] = {0: [("heavy", 500, 500)] * 200}
    for step in range(5, 200, 10):
        arrivals.setdefault(step, []).append(("light", 50, 50))
    served, _ = _serve(_vtc(), arrivals, 200)
    for step in range(5, 200, 10):
        assert "light" in served[step : step + 2], f"light request of step {step} waited"


def test_vtc_returning_tenant_cannot_claim_its_idle_time() -> None:
    """A tenant idle while another was served alone, then backlogged, does not monopolise the
    server to catch up: right after it returns the two alternate (within one request)."""
    arrivals: dict[int, list[tuple[str, int, int]]] = {0: [("b", 100, 100)] * 300}
    arrivals[100] = [("a", 100, 100)] * 100
    served, _ = _serve(_vtc(), arrivals, 140)
    window = served[100:140]
    assert abs(window.count("a") - window.count("b")) <= 2


def test_vtc_weighted_tenants_share_in_proportion() -> None:
    """Weighted VTC (§4.3): backlogged tenants with weights 3:1 get tokens 3:1."""
    arrivals: dict[int, list[tuple[str, int, int]]] = {
        0: [("gold", 100, 100)] * 400 + [("free", 100, 100)] * 400
    }
    v = _vtc(weights={"gold": 3.0})
    served, _ = _serve(v, arrivals, 400)
    assert served.count("gold") == pytest.approx(3 * served.count("free"), abs=3)


def test_vtc_is_work_conserving() -> None:
    """Whenever a request waits, one is dispatched (pick never declines)."""
    arrivals = {k: [("a", 10, 10)] for k in range(0, 50, 3)}
    served, waiting = _serve(_vtc(), arrivals, 60)
    for step, n in waiting.items():
        assert (served[step] != "") == (n > 0)
