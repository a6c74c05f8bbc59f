"""API-key authentication: `Authorization: Bearer <key>` to a `Principal` (tenant + default class).

Modes:
  - no keys configured: every request is "anonymous" (OpenAI clients always send some key, e.g.
    "EMPTY", so a present key is ignored rather than refused);
  - keys configured, required=False: no header -> anonymous; a known key -> its tenant; a present
    but unknown or malformed one -> 401;
  - required=True: a known key or 401.
Keys are stored hashed (SHA-256; a key given in plain text is hashed when the config loads),
compared in constant time and never echoed in errors. Besides `keys` in the Serve config they can
come from a file (`keys_file`: JSON or YAML mapping key -> entry, or "sha256:<hex>" -> entry for
keys stored hashed) or an environment variable (`keys_env`: the same mapping as JSON), so no key
needs to sit in a deploy file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.entitlements import Entitlement
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
    tokens_per_minute: int | None = Field(None, ge=1)
    """Token-rate limit of this key (prompt + max_tokens per minute); None: unlimited."""
    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    """Fairness weight of the tenant: its share of a band's tokens relative to other tenants
    (the scheduler's virtual token counter, VTC)."""
    entitlement: Entitlement = Entitlement()
    """What the key's requests may ask for: highest and default band, tightest TTFT / TPOT,
    reject or clamp above them (default: anything, standard band when none is named)."""


HASH_PREFIX = "sha256:"


def key_digest(key: str) -> str:
    """How a key is stored: "sha256:<hex digest>"."""
    return HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def _load_mapping(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) if not text.lstrip().startswith("{") else json.loads(text)
    except (ValueError, yaml.YAMLError) as err:
        raise ValueError(f"{source}: not a JSON/YAML mapping of key -> entry ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{source}: must be a mapping of key -> entry")
    return data


class APIKeyConfig(BaseModel):
    """API keys the ingress accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: dict[str, KeyEntry] = Field(default_factory=dict)
    """Key string -> what it grants."""
    keys_file: str | None = None
    """A JSON/YAML file of more keys (key or "sha256:<hex>" -> entry), read at start-up."""
    keys_env: str | None = None
    """An environment variable holding more keys as JSON (same mapping), read at start-up."""
    required: bool = False
    """Refuse requests without a known key (False in the embedded default)."""

    @model_validator(mode="after")
    def _usable(self) -> Self:
        merged: dict[str, Any] = dict(self.keys)
        if self.keys_file:
            path = Path(self.keys_file).expanduser()
            if not path.is_file():
                raise ValueError(f"api_keys.keys_file: {path} does not exist")
            merged |= _load_mapping(path.read_text(), f"api_keys.keys_file {path}")
        if self.keys_env:
            text = os.environ.get(self.keys_env)
            if text is None:
                raise ValueError(f"api_keys.keys_env: ${self.keys_env} is not set")
            merged |= _load_mapping(text, f"api_keys.keys_env ${self.keys_env}")
        hashed: dict[str, KeyEntry] = {}
        for key, entry in merged.items():
            if not key or key != key.strip() or " " in key:
                raise ValueError("API keys must be non-empty and contain no whitespace")
            digest = key if key.startswith(HASH_PREFIX) else key_digest(key)
            hashed[digest] = KeyEntry.model_validate(entry)
        object.__setattr__(self, "keys", hashed)  # stored hashed only (frozen model)
        # read once where the config is built; only the digests travel to the replicas
        object.__setattr__(self, "keys_file", None)
        object.__setattr__(self, "keys_env", None)
        if self.required and not self.keys:
            raise ValueError("required=True with no keys would refuse every request")
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

    def tenants(self) -> frozenset[str]:
        """The tenants the keys name."""
        return frozenset(entry.tenant for entry in self.keys.values())


@dataclass(frozen=True, slots=True)
class Principal:
    """Who sent a request: the tenant, the key's default SLO class (None: policy default), its
    token-rate limit (None: unlimited), its fairness weight and its entitlement (None: none
    from a key; tenancy resolution picks the configured or anonymous one)."""

    tenant: str
    default_class: str | None = None
    tokens_per_minute: int | None = None
    weight: float = 1.0
    entitlement: Entitlement | None = None


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
    """Constant-time comparison of the token's digest against every stored digest."""
    found: KeyEntry | None = None
    given = key_digest(token).encode("utf-8")
    for digest, entry in keys.items():
        if hmac.compare_digest(given, digest.encode("utf-8")):
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
    return Principal(
        entry.tenant, entry.default_class, entry.tokens_per_minute, entry.weight, entry.entitlement
    )
