"""Entitlements per key, per configured tenant and for anonymous traffic: a request above its
entitlement is a 403 in OpenAI's shape naming the field and the limit, or clamped with a
response header where configured; anonymous callers cannot name a keyed tenant; defaults that
would break an entitlement fail at start-up. Pure core first, then the app in process."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import FakeMesh, build_ingress
from fastapi.testclient import TestClient
from pydantic import ValidationError

from services.ingress.args import IngressArgs
from services.ingress.core.entitlements import CLAMP_HEADER, Entitlement
from services.ingress.core.errors import APIError
from services.ingress.core.slo import SLOPolicy, resolve_slo
from services.ingress.core.tenancy import TenancyConfig, TenantSpec, resolve_tenancy
from shared.domain import SLO, Request

GW = "x-gateway-inference-fairness-id"
OBJ = "x-gateway-inference-objective"
CFG = TenancyConfig(
    tenants={"gold-gw": TenantSpec(entitlement=Entitlement(max_criticality=1))},
    reserved_tenants=frozenset({"keyco"}),
)
POLICY = SLOPolicy()
CLASS_TTFTS = [c.ttft_ms / 1e3 for c in POLICY.classes.values()]


def _request(slo: SLO) -> Request:
    return Request("r", "m", 10, 10, 0.0, slo, tenant="x")


def _admit(
    headers: dict[str, str], body_slo: Any = None, key: Entitlement | None = None
) -> tuple[Request, dict[str, str]]:
    """Tenancy, then the SLO as the pipeline resolves it, then the entitlement check."""
    ten = resolve_tenancy("k" if key else None, 1.0, None, headers, 0, CFG, key_entitlement=key)
    slo = resolve_slo(body_slo, headers, ten.slo_class, POLICY)
    return ten.entitled(_request(slo), CLASS_TTFTS)


@pytest.mark.parametrize(
    ("headers", "body_slo", "param", "limit"),
    [
        ({OBJ: "critical"}, None, OBJ, "highest criticality 0"),
        ({}, "tight", "slo", "at least 1000 ms"),  # the tightest class (500 ms)
        ({"x-slo-ttft-ms": "200"}, None, "x-slo-ttft-ms", "at least 1000 ms"),
        ({"x-llm-d-slo-ttft-ms": "200"}, None, "x-llm-d-slo-ttft-ms", "at least 1000 ms"),
        ({"x-slo-tpot-ms": "5"}, None, "x-slo-tpot-ms", "at least 30 ms"),
        ({}, {"ttft_ms": 1}, "slo.ttft_ms", "at least 1000 ms"),
        ({}, {"tpot_ms": 1}, "slo.tpot_ms", "at least 30 ms"),
        ({}, {"deadline_ms": 300}, "slo.deadline_ms", "at least 1000 ms"),
    ],
)
def test_anonymous_above_its_entitlement_is_403_naming_field_and_limit(
    headers: dict[str, str], body_slo: Any, param: str, limit: str
) -> None:
    from services.ingress.core.openai_schema import SLOObject

    if isinstance(body_slo, dict):
        body_slo = SLOObject.model_validate(body_slo)
    with pytest.raises(APIError) as err:
        _admit(headers, body_slo)
    e = err.value
    assert (e.status, e.param, e.type, e.code) == (
        403,
        param,
        "permission_error",
        "entitlement_exceeded",
    )
    assert e.message.startswith(f"{param}: ") and limit in e.message


def test_within_the_entitlement_is_served_as_asked() -> None:
    req, headers = _admit({OBJ: "standard", "x-slo-ttft-ms": "1500"})
    assert (req.criticality, req.slo.ttft_deadline_s, headers) == (0, 1.5, {})
    req, _ = _admit({OBJ: "critical"}, "tight", key=Entitlement())  # a key's default: anything
    assert (req.criticality, req.slo.class_name) == (1, "tight")
    req, _ = _admit({GW: "gold-gw", OBJ: "critical"})  # a configured tenant's own entitlement
    assert (req.tenant_weight, req.criticality) == (1.0, 1)


def test_clamping_serves_at_the_limit_and_says_so() -> None:
    key = Entitlement(max_criticality=0, min_ttft_ms=2000, min_tpot_ms=60, over_limit="clamp")
    req, headers = _admit({OBJ: "critical"}, "tight", key=key)
    assert req.criticality == 0
    assert (req.slo.ttft_deadline_s, req.slo.tpot_target_s, req.slo.class_name) == (
        2.0,
        0.06,
        "custom",
    )
    assert headers == {CLAMP_HEADER: "criticality=1->0; slo=500->2000; slo=50->60"}


def test_a_keys_default_band_applies_when_no_objective_is_named() -> None:
    key = Entitlement(max_criticality=1, default_criticality=1)
    req, _ = _admit({}, key=key)
    assert req.criticality == 1
    with pytest.raises(ValidationError, match="default_criticality 1 is above max_criticality 0"):
        Entitlement(max_criticality=0, default_criticality=1)


def test_anonymous_cannot_name_a_keyed_tenant() -> None:
    with pytest.raises(APIError) as err:
        resolve_tenancy(None, 1.0, None, {GW: "keyco"}, 0, CFG)
    assert (err.value.status, err.value.param) == (403, GW)
    assert "has an API key" in err.value.message
    # the key itself still works, and a keyed caller's header is ignored as before
    assert resolve_tenancy("keyco", 1.0, None, {GW: "keyco"}, 0, CFG).tenant == "keyco"


def test_the_keys_tenants_are_reserved_and_defaults_are_checked_at_start_up() -> None:
    args = IngressArgs.model_validate(
        {"models": [{"name": "m"}], "api_keys": {"keys": {"sk-1": {"tenant": "acme"}}}}
    )
    assert "acme" in args.tenancy.reserved_tenants
    with pytest.raises(ValidationError, match=r"tenancy.anonymous: TTFT 1000 ms is tighter"):
        IngressArgs.model_validate(
            {"models": [{"name": "m"}], "tenancy": {"anonymous": {"min_ttft_ms": 60000}}}
        )
    entry = {"tenant": "a", "default_class": "tight", "entitlement": {"min_ttft_ms": 1000}}
    bad_key = {"keys": {"sk-1": entry}}
    with pytest.raises(ValidationError, match=r"api_keys tenant 'a': TTFT 500 ms is tighter"):
        IngressArgs.model_validate({"models": [{"name": "m"}], "api_keys": bad_key})


BODY = {"model": "llama", "prompt": "hello there", "max_tokens": 4}


def test_ingress_answers_403_in_openai_shape_and_serves_the_entitled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = {"keys": {"sk-gold": {"tenant": "gold"}}}
    app, _ = build_ingress(monkeypatch, FakeMesh(), api_keys=keys)
    with TestClient(app, raise_server_exceptions=False) as c:
        denied = c.post("/v1/completions", json=BODY | {"slo": "tight"})
        spoof = c.post("/v1/completions", json=BODY, headers={GW: "gold"})
        served = c.post(
            "/v1/completions",
            json=BODY | {"slo": "tight"},
            headers={"Authorization": "Bearer sk-gold", OBJ: "critical"},
        )
    assert denied.status_code == 403
    assert denied.json() == {
        "error": {
            "message": "slo: TTFT objective 500 ms is tighter than this caller may ask for "
            "(at least 1000 ms)",
            "type": "permission_error",
            "param": "slo",
            "code": "entitlement_exceeded",
        }
    }
    assert spoof.status_code == 403 and spoof.json()["error"]["param"] == GW
    assert served.status_code == 200, served.text
