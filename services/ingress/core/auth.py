"""API-key authentication: `Authorization: Bearer <key>` to a `Principal` (tenant + default class).

Modes:
  - no keys configured: every request is "anonymous" (OpenAI clients always send some key, e.g.
    "EMPTY", so a present key is ignored rather than refused);
  - keys configured, required=False: no header -> anonymous; a known key -> its tenant; a present
    but unknown or malformed one -> 401;
  - required=True: a known key or 401.
Keys are compared in constant time and never echoed in errors.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.errors import unauthorized
from services.ingress.core.slo import SLOPolicy

ANONYMOUS = "anonymous"


class KeyEntry(BaseModel):
    """What one API key grants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant: str = Field(min_length=1)
    """Tenant the key belongs to (recorded on every request it sends)."""
    default_class: str | None = None
    """SLO class for this key's requests that name none (None: the policy's default)."""


class APIKeyConfig(BaseModel):
    """API keys the ingress accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: dict[str, KeyEntry] = Field(default_factory=dict)
    """Key string -> what it grants."""
    required: bool = False
    """Refuse requests without a known key (False in the embedded default)."""

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if self.required and not self.keys:
            raise ValueError("required=True with no keys would refuse every request")
        for key in self.keys:
            if not key or key != key.strip() or " " in key:
                raise ValueError("API keys must be non-empty and contain no whitespace")
        return self

    def check_classes(self, policy: SLOPolicy) -> None:
        """Raise ValueError when a key's default_class is not a class of `policy` (call at
        startup so a typo is a config error, not a 500 at request time)."""
        for entry in self.keys.values():
            if entry.default_class is not None and entry.default_class not in policy.classes:
                raise ValueError(
                    f"tenant '{entry.tenant}': default_class '{entry.default_class}' is not one of "
                    f"{', '.join(sorted(policy.classes))}"
                )


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request: the tenant and the key's default SLO class (None: policy default)."""

    tenant: str
    default_class: str | None = None


def _bearer_token(header: str | None) -> str | None:
    """The token of "Bearer <token>" (scheme case-insensitive); "" for a malformed header;
    None for a missing or blank one."""
    if header is None or not header.strip():
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return ""
    return token


def _lookup(token: str, keys: dict[str, KeyEntry]) -> KeyEntry | None:
    """Constant-time comparison against every configured key."""
    found: KeyEntry | None = None
    given = token.encode("utf-8")
    for key, entry in keys.items():
        if hmac.compare_digest(given, key.encode("utf-8")):
            found = entry
    return found


def authenticate(authorization_header: str | None, config: APIKeyConfig) -> Principal:
    """The principal behind an Authorization header, or APIError 401 (see the module docstring)."""
    if not config.keys:
        return Principal(ANONYMOUS, None)
    token = _bearer_token(authorization_header)
    if token is None:
        if config.required:
            raise unauthorized("missing API key; send 'Authorization: Bearer <key>'")
        return Principal(ANONYMOUS, None)
    if token == "":
        raise unauthorized("malformed Authorization header; expected 'Bearer <key>'")
    entry = _lookup(token, config.keys)
    if entry is None:
        raise unauthorized("invalid API key")
    return Principal(entry.tenant, entry.default_class)
