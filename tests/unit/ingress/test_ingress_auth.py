"""API-key authentication table: modes x headers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.ingress.core import APIError, APIKeyConfig, Principal, SLOPolicy, authenticate
from services.ingress.core.entitlements import Entitlement

KEYS = {"sk-a": {"tenant": "acme", "default_class": "chat"}, "sk-b": {"tenant": "bolt"}}
OPEN = APIKeyConfig()
OPTIONAL = APIKeyConfig.model_validate({"keys": KEYS})
REQUIRED = APIKeyConfig.model_validate({"keys": KEYS, "required": True})

ANON = Principal("anonymous", None)
ACME = Principal("acme", "chat", entitlement=Entitlement())  # a key's default: anything
BOLT = Principal("bolt", None, entitlement=Entitlement())

TABLE = [
    # (id, config, Authorization header, expected Principal or 401 fragment)
    ("open-no-header", OPEN, None, ANON),
    ("open-any-key", OPEN, "Bearer EMPTY", ANON),
    ("open-garbage", OPEN, "garbage", ANON),
    ("optional-no-header", OPTIONAL, None, ANON),
    ("optional-blank-header", OPTIONAL, "   ", ANON),
    ("optional-known", OPTIONAL, "Bearer sk-a", ACME),
    ("optional-unknown", OPTIONAL, "Bearer sk-zzz", "invalid API key"),
    ("optional-malformed", OPTIONAL, "Basic sk-a", "malformed"),
    ("required-no-header", REQUIRED, None, "missing API key"),
    ("required-known", REQUIRED, "Bearer sk-b", BOLT),
    ("required-scheme-case", REQUIRED, "bearer   sk-b ", BOLT),
    ("required-unknown", REQUIRED, "Bearer sk-", "invalid API key"),
    ("required-prefix-of-key", REQUIRED, "Bearer sk-a2", "invalid API key"),
    ("required-no-token", REQUIRED, "Bearer", "malformed"),
    ("required-bare-key", REQUIRED, "sk-a", "malformed"),
]


@pytest.mark.parametrize(
    ("config", "header", "expected"), [pytest.param(*row[1:], id=row[0]) for row in TABLE]
)
def test_ingress_authenticate(
    config: APIKeyConfig, header: str | None, expected: Principal | str
) -> None:
    if isinstance(expected, Principal):
        assert authenticate(header, config) == expected
        return
    with pytest.raises(APIError) as info:
        authenticate(header, config)
    err = info.value
    assert err.status == 401
    assert err.body()["error"]["code"] == "invalid_api_key"
    assert expected in err.message
    assert "sk-" not in err.message  # the key is never echoed
    assert err.headers() == {"WWW-Authenticate": "Bearer"}


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"required": True}, "refuse every request"),
        ({"keys": {"": {"tenant": "t"}}}, "non-empty"),
        ({"keys": {"a b": {"tenant": "t"}}}, "whitespace"),
        ({"keys": {"k": {"tenant": ""}}}, "tenant"),
        ({"keys": {"k": {"tenant": "t", "extra": 1}}}, "Extra inputs"),
    ],
)
def test_ingress_key_config_rejects_bad_config(config: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        APIKeyConfig.model_validate(config)


def test_ingress_key_config_checks_classes_against_policy() -> None:
    OPTIONAL.check_classes(SLOPolicy())  # chat exists
    bad = APIKeyConfig.model_validate({"keys": {"k": {"tenant": "t", "default_class": "gold"}}})
    with pytest.raises(ValueError, match="default_class 'gold'"):
        bad.check_classes(SLOPolicy())
