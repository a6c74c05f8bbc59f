"""Tenants and criticality bands: from a request's API key, headers and body to the tenant, the
band and the priority the replica's engine gets (services/ingress/README.md, "Tenants, bands
and fairness", has the mapping table).

- Tenant: the API key's tenant when the key identifies one; else the fairness id that gateways
  send (`x-gateway-inference-fairness-id`, Gateway API Inference Extension; or
  `x-llm-d-inference-fairness-id`, llm-d); else "anonymous". A key-identified tenant ignores
  the headers (a client cannot claim another tenant's share).
- Criticality (gateway convention, InferenceObjective `priority`: higher is more critical, 0
  standard, negative sheddable): the objective named by `x-gateway-inference-objective` (a
  configured objective: its criticality and optional SLO class); else the body's `priority`;
  else 0.
- Engine priority (vLLM's, lower first): band first, then the SLO class by TTFT, so the
  engine's own queue agrees with the scheduler's bands ("The SLO class maps to vLLM's
  `priority`").
Every bad value is a 400 naming the header or field and the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.ingress.core.auth import ANONYMOUS, Principal
from services.ingress.core.errors import bad_request, overloaded
from shared.domain import SLO, Request

FAIRNESS_HEADERS = ("x-gateway-inference-fairness-id", "x-llm-d-inference-fairness-id")
OBJECTIVE_HEADER = "x-gateway-inference-objective"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")

BAND_STRIDE = 100
"""Engine priorities of one band span [k * BAND_STRIDE, (k + 1) * BAND_STRIDE)."""


class ObjectiveSpec(BaseModel):
    """One inference objective a client may name in `x-gateway-inference-objective`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    criticality: int = Field(ge=-1000, le=1000)
    """Band: higher is more critical, 0 standard, negative sheddable (shed first)."""
    slo_class: str | None = None
    """SLO class for its requests that name none (None: the key's or the policy's default)."""


class TenantSpec(BaseModel):
    """Fairness settings of a tenant known by its fairness id (tenants known by an API key
    take theirs from the key's entry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weight: float = Field(1.0, gt=0, allow_inf_nan=False)
    """Share of its band's tokens relative to other tenants (VTC weight)."""
    tokens_per_minute: int | None = Field(None, ge=1)
    """Token-rate quota (prompt + max_tokens per minute; 429 + Retry-After past it)."""


def _default_objectives() -> dict[str, ObjectiveSpec]:
    return {
        "critical": ObjectiveSpec(criticality=1),
        "standard": ObjectiveSpec(criticality=0),
        "sheddable": ObjectiveSpec(criticality=-1),
    }


class TenancyConfig(BaseModel):
    """How tenants, bands and fairness ids are read at the ingress."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objectives: dict[str, ObjectiveSpec] = Field(default_factory=_default_objectives)
    """Objective name -> band (and optional SLO class); default critical 1, standard 0,
    sheddable -1."""
    tenants: dict[str, TenantSpec] = Field(default_factory=dict)
    """Fairness id -> weight and quota, for tenants identified by the fairness headers."""
    fairness_headers: bool = True
    """Read the tenant from the fairness headers when the API key names none."""
    max_tenant_id_chars: int = Field(128, ge=1)
    """Longest fairness id accepted."""
    shed_admitting_fraction: float = Field(0.5, gt=0, le=1)
    """Sheddable requests are answered 429 at once when this fraction of
    max_admitting_requests is already in admission (the ingress is saturated)."""

    def check_classes(self, classes: Mapping[str, object]) -> None:
        """ValueError when an objective names an SLO class that is not configured (start-up)."""
        for name, spec in self.objectives.items():
            if spec.slo_class is not None and spec.slo_class not in classes:
                raise ValueError(
                    f"tenancy.objectives.{name}.slo_class '{spec.slo_class}' is not one of "
                    f"{', '.join(sorted(classes))}"
                )

    @field_validator("objectives")
    @classmethod
    def _names(cls, value: dict[str, ObjectiveSpec]) -> dict[str, ObjectiveSpec]:
        for name in value:
            if not _ID.match(name):
                raise ValueError(f"objective name {name!r} must match {_ID.pattern}")
        return value


def _one_header(headers: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    """(name, value) of the one header among `names` that is present; 400 when two are sent
    with different values."""
    seen: dict[str, str] = {}
    for raw, value in headers.items():
        name = raw.lower()
        if name in names:
            seen.setdefault(name, value.strip())
            if seen[name] != value.strip():
                raise bad_request(name, f"sent twice with different values: {seen[name]!r}")
    if not seen:
        return None
    values = set(seen.values())
    if len(values) > 1:
        listed = ", ".join(f"{n}={v!r}" for n, v in sorted(seen.items()))
        raise bad_request(sorted(seen)[0], f"fairness ids disagree: {listed}")
    name = sorted(seen)[0]
    return name, seen[name]


def resolve_tenant(
    key_tenant: str | None, headers: Mapping[str, str], cfg: TenancyConfig
) -> str | None:
    """The fairness id from the headers, or None (use the key's tenant or "anonymous").
    `key_tenant`: the tenant the API key names (None: no key identified the caller)."""
    found = _one_header(headers, FAIRNESS_HEADERS)
    if found is None or not cfg.fairness_headers or key_tenant is not None:
        return None
    name, value = found
    if not value:
        raise bad_request(name, "must not be empty")
    if len(value) > cfg.max_tenant_id_chars:
        raise bad_request(
            name, f"must be at most {cfg.max_tenant_id_chars} characters, got {len(value)}"
        )
    if not _ID.match(value):
        raise bad_request(
            name,
            "must start with a letter or digit and contain only letters, digits and . _ : @ / + -",
        )
    return value


def resolve_criticality(
    headers: Mapping[str, str], body_priority: int, cfg: TenancyConfig
) -> tuple[int, str | None]:
    """(criticality, the objective's SLO class or None): the objective header first, else the
    body's priority (its range is checked at admission)."""
    found = _one_header(headers, (OBJECTIVE_HEADER,))
    if found is None:
        return body_priority, None
    name, value = found
    spec = cfg.objectives.get(value)
    if spec is None:
        valid = ", ".join(sorted(cfg.objectives)) or "(none configured)"
        raise bad_request(name, f"unknown objective {value!r}; valid: {valid}")
    return spec.criticality, spec.slo_class


def band_rank(criticality: int) -> int:
    """0 for critical (> 0), 1 for standard (0), 2 for sheddable (< 0)."""
    if criticality > 0:
        return 0
    return 1 if criticality == 0 else 2


def engine_priority(criticality: int, slo: SLO, class_ttfts_s: list[float]) -> int:
    """vLLM's priority (lower first) for the replica: BAND_STRIDE x band rank + the rank of the
    request's TTFT SLO among the configured classes' (ascending; tighter first)."""
    ttft = slo.ttft_deadline_s
    rank = sum(1 for t in sorted(set(class_ttfts_s)) if t < ttft - 1e-9)
    if not math.isfinite(ttft):
        rank = len(class_ttfts_s)
    return BAND_STRIDE * band_rank(criticality) + min(rank, BAND_STRIDE - 1)


@dataclass(frozen=True, slots=True)
class Tenancy:
    """What tenancy resolution decided for one request."""

    tenant: str
    weight: float
    tokens_per_minute: int | None
    criticality: int
    slo_class: str | None
    """The objective's SLO class (None: the key's or the policy's default)."""
    fixed_engine_priority: int | None = None
    """An engine priority set by the caller (the Batch API's lowest), not derived."""

    @property
    def sheddable(self) -> bool:
        return self.criticality < 0

    def apply(self, request: Request, class_ttfts_s: list[float]) -> Request:
        """`request` with this band, weight and the engine priority they give."""
        prio = self.fixed_engine_priority
        if prio is None:
            prio = engine_priority(self.criticality, request.slo, class_ttfts_s)
        return replace(
            request, criticality=self.criticality, tenant_weight=self.weight, priority=prio
        )


def resolve_tenancy(
    key_tenant: str | None,
    key_weight: float,
    key_tokens_per_minute: int | None,
    headers: Mapping[str, str],
    body_priority: int,
    cfg: TenancyConfig,
    anonymous: str = ANONYMOUS,
) -> Tenancy:
    """Tenant, weight, quota and band of a request (module docstring). `key_*`: what the API
    key's entry says (key_tenant None: no key identified the caller)."""
    from_header = resolve_tenant(key_tenant, headers, cfg)
    criticality, slo_class = resolve_criticality(headers, body_priority, cfg)
    if from_header is not None:
        spec = cfg.tenants.get(from_header, TenantSpec())
        return Tenancy(from_header, spec.weight, spec.tokens_per_minute, criticality, slo_class)
    tenant = key_tenant if key_tenant is not None else anonymous
    return Tenancy(tenant, key_weight, key_tokens_per_minute, criticality, slo_class)


def admit_tenancy(
    key: Principal,
    headers: Mapping[str, str],
    body_priority: int,
    cfg: TenancyConfig,
    admitting: int,
    max_admitting: int,
) -> tuple[Principal, Tenancy]:
    """The request's principal (tenant, weight, quota) and tenancy, from the API key's principal
    `key`. Sheddable traffic goes first under saturation: 429 (drop reason
    "sheddable-saturated") at once, before any internal call, while more than
    shed_admitting_fraction of max_admitting requests are in admission."""
    ten = resolve_tenancy(
        None if key.tenant == ANONYMOUS else key.tenant,
        key.weight,
        key.tokens_per_minute,
        headers,
        body_priority,
        cfg,
    )
    if ten.sheddable and admitting > cfg.shed_admitting_fraction * max_admitting:
        raise overloaded(
            f"shed: sheddable request (criticality {ten.criticality}) while the ingress is "
            f"saturated ({admitting} requests in admission)",
            1.0,
            drop_reason="sheddable-saturated",
        )
    return Principal(ten.tenant, key.default_class, ten.tokens_per_minute, ten.weight), ten
