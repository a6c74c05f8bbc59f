"""Tenants and bands at the ingress: the mapping from API key, fairness headers, objective
header and body priority to tenant / criticality / engine priority, and the 400s, 403s and 429s
(with x-slomesh-drop-reason) it answers. Pure core first, then the app in process."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient

from services.ingress.core.entitlements import Entitlement
from services.ingress.core.errors import APIError, overloaded
from services.ingress.core.slo import SLOPolicy, parse_slo_headers, resolve_slo
from services.ingress.core.tenancy import (
    ObjectiveSpec,
    TenancyConfig,
    TenantSpec,
    engine_priority,
    resolve_tenancy,
)
from shared.domain import SLO
from shared.rpc.slomesh.v1 import scheduler_pb2

GW = "x-gateway-inference-fairness-id"
LLMD = "x-llm-d-inference-fairness-id"
OBJ = "x-gateway-inference-objective"
CFG = TenancyConfig(
    objectives={
        "critical": ObjectiveSpec(criticality=1),
        "standard": ObjectiveSpec(criticality=0),
        "sheddable": ObjectiveSpec(criticality=-1),
        "chat-gold": ObjectiveSpec(criticality=5, slo_class="interactive"),
    },
    tenants={"acme": TenantSpec(weight=3.0, tokens_per_minute=1000)},
    anonymous=Entitlement(max_criticality=1000),  # the mapping alone; entitlements below
)


@pytest.mark.parametrize(
    ("key_tenant", "headers", "body_priority", "expected"),
    [
        # no key, no header: anonymous, standard
        (None, {}, 0, ("anonymous", 1.0, None, 0, None)),
        # the gateway's fairness id names the tenant; its configured weight and quota apply
        (None, {GW: "acme"}, 0, ("acme", 3.0, 1000, 0, None)),
        (None, {LLMD: "team-b"}, 0, ("team-b", 1.0, None, 0, None)),
        (None, {GW: "x", LLMD: "x"}, 0, ("x", 1.0, None, 0, None)),  # both, agreeing
        # an API key's tenant wins over any header (a client cannot claim another's share)
        ("keyco", {GW: "acme"}, 0, ("keyco", 2.0, 50, 0, None)),
        # criticality: the objective header, else the entitlement's default (standard); the
        # body's priority never sets it (vLLM's meaning: only a tie-break inside the band)
        (None, {OBJ: "sheddable"}, 0, ("anonymous", 1.0, None, -1, None)),
        (None, {OBJ: "chat-gold"}, -7, ("anonymous", 1.0, None, 5, "interactive")),
        (None, {}, -3, ("anonymous", 1.0, None, 0, None)),
        (None, {}, 2, ("anonymous", 1.0, None, 0, None)),
    ],
)
def test_tenancy_mapping(
    key_tenant: str | None,
    headers: dict[str, str],
    body_priority: int,
    expected: tuple[str, float, int | None, int, str | None],
) -> None:
    weight, quota = (2.0, 50) if key_tenant else (1.0, None)  # what the key's entry says
    ten = resolve_tenancy(key_tenant, weight, quota, headers, body_priority, CFG)
    assert (ten.tenant, ten.weight, ten.tokens_per_minute, ten.criticality, ten.slo_class) == (
        expected
    )
    assert ten.tie_break == body_priority


@pytest.mark.parametrize(
    ("headers", "param", "rule"),
    [
        ({GW: ""}, GW, "must not be empty"),
        ({GW: "a b"}, GW, "must start with a letter or digit"),
        ({GW: "-x"}, GW, "must start with a letter or digit"),
        ({GW: "x" * 129}, GW, "at most 128 characters, got 129"),
        ({GW: "a", LLMD: "b"}, GW, "fairness ids disagree"),
        ({OBJ: "platinum"}, OBJ, "unknown objective 'platinum'; valid: chat-gold, critical"),
    ],
)
def test_tenancy_bad_headers_are_400_naming_the_header(
    headers: dict[str, str], param: str, rule: str
) -> None:
    with pytest.raises(APIError) as err:
        resolve_tenancy(None, 1.0, None, headers, 0, CFG)
    assert err.value.status == 400 and err.value.param == param
    assert rule in err.value.message and err.value.message.startswith(f"{param}: ")


def test_tenancy_objective_with_an_unknown_class_fails_at_start_up() -> None:
    cfg = TenancyConfig(objectives={"x": ObjectiveSpec(criticality=1, slo_class="nope")})
    with pytest.raises(ValueError, match=r"tenancy.objectives.x.slo_class 'nope' is not one of"):
        cfg.check_classes(SLOPolicy().classes)


CLASSES = [0.5, 3.0, 15.0, 20.0, 60.0]


@pytest.mark.parametrize(
    ("criticality", "ttft_s", "tie_break", "expected"),
    [
        (1, 0.5, 0, -1000 + 20),  # critical, tightest class, no tie-break
        (1, 60.0, 0, -1000 + 4 * 40 + 20),
        (0, 20.0, 0, -400 + 3 * 40 + 20),  # standard band starts at -400
        (0, 10.0, 0, -400 + 2 * 40 + 20),  # a custom TTFT between classes ranks between them
        (-1, 0.5, 0, 200 + 20),  # sheddable after every standard request
        (-5, 3600.0, 0, 200 + 5 * 40 + 20),
        (0, 20.0, -3, -400 + 3 * 40 + 17),  # vLLM's meaning: lower priority first
        (0, 20.0, 5, -400 + 3 * 40 + 25),
        (0, 20.0, -1000, -400 + 3 * 40 + 0),  # clamped: never past its class or band
        (0, 20.0, 1000, -400 + 3 * 40 + 39),
    ],
)
def test_engine_priority_orders_bands_then_classes_then_the_body_priority(
    criticality: int, ttft_s: float, tie_break: int, expected: int
) -> None:
    assert engine_priority(criticality, SLO(ttft_s), CLASSES, tie_break) == expected


def test_the_body_priority_breaks_ties_only_inside_band_and_class() -> None:
    """Every (band, class) pair keeps its order whatever priorities the bodies carry."""
    keys = [(c, t) for c in (1, 0, -1) for t in CLASSES]  # most urgent first
    for (c1, t1), (c2, t2) in itertools.pairwise(keys):
        worst_first = engine_priority(c1, SLO(t1), CLASSES, 1000)
        best_second = engine_priority(c2, SLO(t2), CLASSES, -1000)
        assert worst_first < best_second
    assert engine_priority(1, SLO(0.1), CLASSES, -1000) >= -1000
    assert engine_priority(-1, SLO(1e9), CLASSES, 1000) < 1000  # the Batch API's is last


@pytest.mark.parametrize(
    ("headers", "expected", "error"),
    [
        ({"x-llm-d-slo-ttft-ms": "1500"}, 1.5, None),
        ({"x-llm-d-slo-ttft-ms": "1500", "x-slo-ttft-ms": "1500.0"}, 1.5, None),
        ({"x-llm-d-slo-ttft-ms": "1500", "x-slo-ttft-ms": "900"}, None, "different values"),
        ({"x-llm-d-slo-ttft-ms": "soon"}, None, "x-llm-d-slo-ttft-ms: must be a positive"),
    ],
)
def test_llmd_ttft_header_sets_the_slo(
    headers: dict[str, str], expected: float | None, error: str | None
) -> None:
    if error is not None:
        with pytest.raises(APIError, match=error):
            parse_slo_headers(headers)
        return
    assert resolve_slo(None, headers, None, SLOPolicy()).ttft_deadline_s == expected


def test_drop_reason_rides_in_a_header() -> None:
    err = overloaded("shed", 2.0, drop_reason="sheddable-saturated")
    assert err.headers() == {"Retry-After": "2", "x-slomesh-drop-reason": "sheddable-saturated"}
    assert "x-slomesh-drop-reason" not in overloaded("busy", 1.0).headers()


class RecordingMesh(FakeMesh):
    """FakeMesh that keeps what scheduler.Admit received and may reject with a drop reason."""

    def __init__(self, drop_reason: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.metas: list[Any] = []
        self.drop_reason = drop_reason

    async def call(self, application: str, kind: str, method: str, message: Any, timeout_s=None):
        if (kind, method) == ("scheduler", "Admit"):
            self.metas.append(message.meta)
            if self.drop_reason:
                return scheduler_pb2.AdmitReply(
                    admitted=False, reason="shed", retry_after_s=1.0, drop_reason=self.drop_reason
                )
        return await super().call(application, kind, method, message, timeout_s)


def _client(monkeypatch: pytest.MonkeyPatch, mesh: FakeMesh, **args: Any) -> Iterator[TestClient]:
    app, _ = build_ingress(monkeypatch, mesh, **args)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


BODY = {"model": "llama", "prompt": "hello there", "max_tokens": 4}


def test_ingress_sends_tenant_band_and_engine_priority_to_the_scheduler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = RecordingMesh()
    keys = {"keys": {"k1": {"tenant": "t1", "weight": 2}}}
    for c in _client(monkeypatch, mesh, api_keys=keys):
        r = c.post("/v1/completions", json=BODY, headers={GW: "gw-tenant", OBJ: "sheddable"})
        assert r.status_code == 200, r.text
        r = c.post(
            "/v1/completions",
            json=BODY | {"priority": -2, "slo": "batch-1"},
            headers={"Authorization": "Bearer k1", GW: "ignored", OBJ: "critical"},
        )
        assert r.status_code == 200, r.text
    first, second = mesh.metas
    assert (first.tenant, first.criticality, first.tenant_weight) == ("gw-tenant", -1, 1.0)
    assert first.priority >= 200  # sheddable band
    assert (second.tenant, second.criticality, second.tenant_weight) == ("t1", 1, 2.0)
    assert second.priority < -400  # critical band (the body's priority is only a tie-break)


@pytest.mark.parametrize(
    ("headers", "param"),
    [({OBJ: "gold"}, OBJ), ({GW: "bad id"}, GW), ({"x-llm-d-slo-ttft-ms": "0"}, None)],
)
def test_ingress_bad_tenancy_header_is_openai_400(
    monkeypatch: pytest.MonkeyPatch, headers: dict[str, str], param: str | None
) -> None:
    for c in _client(monkeypatch, RecordingMesh()):
        r = c.post("/v1/completions", json=BODY, headers=headers)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == (param or "x-llm-d-slo-ttft-ms")


def test_ingress_scheduler_drop_reason_becomes_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    for c in _client(monkeypatch, RecordingMesh(drop_reason="sheddable-saturated")):
        r = c.post("/v1/completions", json=BODY, headers={OBJ: "sheddable"})
    assert r.status_code == 429
    assert r.headers["x-slomesh-drop-reason"] == "sheddable-saturated"
    assert r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


def test_ingress_sheds_sheddable_traffic_first_when_saturated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mesh = RecordingMesh()
    keys = {"keys": {"gold": {"tenant": "gold"}}}
    app, inst = build_ingress(monkeypatch, mesh, max_admitting_requests=4, api_keys=keys)
    with TestClient(app, raise_server_exceptions=False) as c:
        inst.pipeline.admitting = 3  # over half of max_admitting_requests already admitting
        shed = c.post("/v1/completions", json=BODY, headers={OBJ: "sheddable"})
        kept = c.post(
            "/v1/completions", json=BODY, headers={OBJ: "critical", "Authorization": "Bearer gold"}
        )
    assert shed.status_code == 429
    assert shed.headers["x-slomesh-drop-reason"] == "sheddable-saturated"
    assert "Retry-After" in shed.headers
    assert kept.status_code == 200
    assert [m.criticality for m in mesh.metas] == [1]  # the shed one never reached the mesh
