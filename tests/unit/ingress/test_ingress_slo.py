"""SLO resolution: precedence, header parsing, limits and policy configuration."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from services.ingress.core import APIError, SLOObject, SLOPolicy, resolve_slo
from services.ingress.core.entitlements import anonymous_entitlement
from services.ingress.core.slo import parse_slo_headers
from shared.domain import SLO
from shared.workloads.slo_classes import CLASS_PRESETS

POLICY = SLOPolicy()


def obj(**ms: float) -> SLOObject:
    return SLOObject.model_validate(ms)


PRECEDENCE = [
    # (id, body slo, headers, key default class, expected SLO)
    ("object-beats-all", obj(ttft_ms=250, tpot_ms=40), {"x-slo-ttft-ms": "900"}, "batch-1",
     SLO(0.25, 0.04, None, "custom")),
    ("class-name-beats-headers", "chat", {"x-slo-ttft-ms": "900"}, "batch-1",
     SLO(1.0, 0.05, None, "chat")),
    ("headers-beat-key", None, {"x-slo-ttft-ms": "900", "x-slo-tpot-ms": "25"}, "batch-1",
     SLO(0.9, 0.025, None, "custom")),
    ("key-beats-policy", None, {}, "batch-2", SLO(3600.0, None, None, "batch-2")),
    ("policy-default", None, {}, None, SLO(1.0, 0.05, None, "chat")),
    ("unrelated-headers-ignored", None, {"x-request-id": "abc"}, None,
     SLO(1.0, 0.05, None, "chat")),
    ("tpot-header-only-takes-key-ttft", None, {"x-slo-tpot-ms": "40"}, "tight",
     SLO(0.5, 0.04, None, "custom")),
    ("tpot-object-only-takes-policy-ttft", obj(tpot_ms=40), {}, None,
     SLO(1.0, 0.04, None, "custom")),
    ("object-deadline-caps-default-ttft", obj(deadline_ms=600), {}, None,
     SLO(0.6, None, 0.6, "custom")),
    ("object-omitted-tpot-means-none", obj(ttft_ms=100), {}, "chat",
     SLO(0.1, None, None, "custom")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("body_slo", "headers", "key_class", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in PRECEDENCE],
)
def test_ingress_slo_precedence(
    body_slo: str | SLOObject | None, headers: dict[str, str], key_class: str | None, expected: SLO
) -> None:
    got = resolve_slo(body_slo, headers, key_class, POLICY)
    assert got.class_name == expected.class_name
    assert got.ttft_deadline_s == pytest.approx(expected.ttft_deadline_s)
    assert got.tpot_target_s == pytest.approx(expected.tpot_target_s)
    assert got.e2e_deadline_s == pytest.approx(expected.e2e_deadline_s)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-SLO-TTFT-MS": "1500"}, {"x-slo-ttft-ms": 1500.0}),
        ({"x-Slo-Tpot-Ms": " 12.5 "}, {"x-slo-tpot-ms": 12.5}),
        (
            {"x-slo-ttft-ms": "1e3", "X-SLO-TPOT-MS": "20"},
            {"x-slo-ttft-ms": 1000.0, "x-slo-tpot-ms": 20.0},
        ),
        ({"X-SLO-TTFT-MS": "100", "x-slo-ttft-ms": "100"}, {"x-slo-ttft-ms": 100.0}),
        ({"content-type": "application/json"}, {}),
    ],
)
def test_ingress_slo_headers_parse_case_insensitively(
    headers: dict[str, str], expected: dict[str, float]
) -> None:
    assert parse_slo_headers(headers) == expected


@pytest.mark.parametrize(
    ("headers", "param", "fragment"),
    [
        ({"x-slo-ttft-ms": "abc"}, "x-slo-ttft-ms", "positive number"),
        ({"x-slo-ttft-ms": ""}, "x-slo-ttft-ms", "positive number"),
        ({"X-SLO-TTFT-MS": "0"}, "x-slo-ttft-ms", "positive number"),
        ({"x-slo-tpot-ms": "-3"}, "x-slo-tpot-ms", "positive number"),
        ({"x-slo-tpot-ms": "nan"}, "x-slo-tpot-ms", "positive number"),
        ({"x-slo-ttft-ms": "inf"}, "x-slo-ttft-ms", "positive number"),
        ({"X-SLO-TTFT-MS": "100", "x-slo-ttft-ms": "200"}, "x-slo-ttft-ms", "different values"),
    ],
)
def test_ingress_slo_bad_header_is_400(headers: dict[str, str], param: str, fragment: str) -> None:
    with pytest.raises(APIError) as info:
        resolve_slo(None, headers, None, POLICY)
    assert info.value.status == 400
    assert info.value.param == param
    assert info.value.message.startswith(f"{param}: ")
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("body_slo", "headers", "param", "fragment"),
    [
        (obj(ttft_ms=0.5), {}, "slo.ttft_ms", ">= 1 ms"),
        (obj(ttft_ms=1e9), {}, "slo.ttft_ms", "<= 86400000 ms"),
        (obj(ttft_ms=10, tpot_ms=0.01), {}, "slo.tpot_ms", ">= 0.1 ms"),
        (obj(ttft_ms=10, tpot_ms=120_000), {}, "slo.tpot_ms", "<= 60000 ms"),
        (obj(ttft_ms=1000, deadline_ms=500), {}, "slo.deadline_ms", "TTFT objective"),
        (obj(ttft_ms=1000, deadline_ms=1e10), {}, "slo.deadline_ms", "<= 86400000 ms"),
        (None, {"x-slo-ttft-ms": "0.001"}, "x-slo-ttft-ms", ">= 1 ms"),
        (None, {"x-slo-tpot-ms": "1e9"}, "x-slo-tpot-ms", "<= 60000 ms"),
        (
            "Interactive",
            {},
            "slo",
            "unknown SLO class 'Interactive'; valid: batch, batch-1, batch-2, "
            "chat, e2e-180, e2e-300, e2e-90, interactive, relaxed, tight",
        ),
    ],
)
def test_ingress_slo_out_of_limits_is_400(
    body_slo: str | SLOObject | None, headers: dict[str, str], param: str, fragment: str
) -> None:
    with pytest.raises(APIError) as info:
        resolve_slo(body_slo, headers, None, POLICY)
    assert (info.value.status, info.value.param) == (400, param)
    assert fragment in info.value.message


def test_ingress_slo_unknown_key_class_is_server_error() -> None:
    with pytest.raises(APIError) as info:
        resolve_slo(None, {}, "gold", POLICY)
    assert info.value.status == 500
    assert info.value.type == "server_error"
    assert "gold" in info.value.message


def test_ingress_slo_default_classes_are_sized_for_chat_and_keep_the_paper_names() -> None:
    assert set(POLICY.classes) == {
        "chat",
        "tight",
        "relaxed",
        "batch",
        "interactive",
        "batch-1",
        "batch-2",
        "e2e-90",
        "e2e-180",
        "e2e-300",
    }
    assert POLICY.default_class == "chat"
    plain = resolve_slo(None, {}, None, POLICY)  # a client that says nothing gets chat latency
    assert (plain.class_name, plain.ttft_deadline_s, plain.tpot_target_s) == ("chat", 1.0, 0.05)
    assert POLICY.classes["tight"].ttft_ms == pytest.approx(500.0)
    assert POLICY.classes["batch"].ttft_ms == pytest.approx(600_000.0)
    assert POLICY.classes["batch"].tpot_ms is None
    assert POLICY.classes["interactive"].ttft_ms == pytest.approx(20_000.0)  # QLM's, kept
    assert POLICY.classes["batch-2"].ttft_ms == pytest.approx(3_600_000.0)


def test_ingress_slo_the_default_class_fits_the_anonymous_entitlement() -> None:
    anonymous = anonymous_entitlement()
    anonymous.check_slo(resolve_slo(None, {}, None, POLICY), "anonymous")  # no ValueError
    assert POLICY.classes[POLICY.default_class].ttft_ms >= anonymous.min_ttft_ms


@pytest.mark.parametrize(
    ("class_set", "names", "default", "chat"),
    [
        ("qlm", {"interactive", "batch-1", "batch-2"}, "interactive", None),
        ("papers", set(CLASS_PRESETS), "interactive", (3000.0, 30.0)),  # SCORPIO's chat
        ("default", set(POLICY.classes), "chat", (1000.0, 50.0)),
    ],
)
def test_ingress_slo_class_sets_are_named_presets(
    class_set: str, names: set[str], default: str, chat: tuple[float, float] | None
) -> None:
    policy = SLOPolicy.model_validate({"class_set": class_set})
    assert set(policy.classes) == names and policy.default_class == default
    got = policy.classes.get("chat")
    assert (None if got is None else (got.ttft_ms, got.tpot_ms)) == chat
    if class_set == "qlm":  # the paper's setting: no TPOT objective, TTFT 20 s by default
        assert resolve_slo(None, {}, None, policy) == SLO(20.0, None, None, "interactive")


def test_ingress_slo_classes_given_keep_or_need_their_default() -> None:
    own = {"gold": {"ttft_ms": 2000}, "chat": {"ttft_ms": 1500}}
    assert SLOPolicy.model_validate({"classes": own}).default_class == "chat"
    with pytest.raises(ValidationError, match="default_class 'chat' is not one of the classes"):
        SLOPolicy.model_validate({"classes": {"gold": {"ttft_ms": 2000}}})
    with pytest.raises(ValidationError, match="classes"):
        SLOPolicy.model_validate({"classes": 7})
    with pytest.raises(ValidationError, match="unknown class_set 'scorpio'"):
        SLOPolicy.model_validate({"class_set": "scorpio"})


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"default_class": "gold"}, "default_class 'gold'"),
        ({"classes": {}}, "must not be empty"),
        ({"classes": {"custom": {"ttft_ms": 100}}, "default_class": "custom"}, "reserved"),
        ({"classes": {"x": {"ttft_ms": 0.1}}, "default_class": "x"}, "classes.x.ttft_ms"),
        ({"limits": {"min_ttft_ms": 10, "max_ttft_ms": 5}}, "min_ttft_ms must be <="),
        ({"classes": {"x": {"ttft_ms": -1}}, "default_class": "x"}, "greater than 0"),
        ({"unknown": 1}, "Extra inputs"),
    ],
)
def test_ingress_slo_policy_rejects_bad_config(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(fragment)):
        SLOPolicy.model_validate(config)


def test_ingress_slo_custom_policy_classes_and_limits() -> None:
    policy = SLOPolicy.model_validate(
        {
            "classes": {"gold": {"ttft_ms": 200, "tpot_ms": 20, "deadline_ms": 60_000}},
            "default_class": "gold",
            "limits": {"min_ttft_ms": 50},
        }
    )
    assert resolve_slo(None, {}, None, policy) == SLO(0.2, 0.02, 60.0, "gold")
    with pytest.raises(APIError, match=re.escape("slo.ttft_ms: must be >= 50 ms")):
        resolve_slo(obj(ttft_ms=40), {}, None, policy)
