"""Tenants and criticality bands: from a request's API key, headers and body to the tenant, the
band and the priority the replica's engine gets (services/ingress/README.md, "Tenants, bands
and fairness" and "Entitlements", has the mapping table).

- Tenant: the API key's tenant when the key identifies one (a key-identified tenant ignores the
  headers: a client cannot claim another tenant's share); else the fairness id that gateways
  send (`x-gateway-inference-fairness-id`, Gateway API Inference Extension; or
  `x-llm-d-inference-fairness-id`, llm-d): a configured tenant (`tenants`) as itself, an API
  key's tenant never (403: anonymous callers cannot spend a keyed tenant's quota or share),
  any other id as itself while it has a place in the replica's bounded table
  (tenant_table.py), else as the overflow tenant; else "anonymous".
- Entitlement (entitlements.py): the key's, a configured tenant's, else `anonymous`.
- Criticality (gateway convention, InferenceObjective `priority`: higher is more critical, 0
  standard, negative sheddable): the objective named by `x-gateway-inference-objective` (a
  configured objective: its criticality and optional SLO class), within the entitlement's
  highest; else the entitlement's default. The body's `priority` never sets it.
- Engine priority (vLLM's, lower first): band first, then the SLO class by TTFT, then the
  body's `priority` with vLLM's meaning (lower first) as the tie-break inside them, so the
  engine's own queue agrees with the scheduler's bands.
Every bad value is a 400 naming the header or field and the rule; a request above its
entitlement is a 403 naming the field and the limit (or clamped, where configured).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from services.ingress.core.auth import ANONYMOUS, Principal
from services.ingress.core.entitlements import (
    CLAMP_HEADER,
    OBJECTIVE_HEADER,
    Entitlement,
    SLOSources,
    anonymous_entitlement,
    entitled_criticality,
    entitled_slo,
    forbidden,
)
from services.ingress.core.errors import bad_request, overloaded
from services.ingress.core.tenant_table import TenantTable
from shared.domain import SLO, Request

NO_SLO_SOURCES = SLOSources()
FAIRNESS_HEADERS = ("x-gateway-inference-fairness-id", "x-llm-d-inference-fairness-id")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]*$")

ENGINE_MIN_PRIORITY = -1000
"""The most urgent engine priority (the replicas accept -1000..1000; the Batch API's 1000 is
the least urgent)."""
BAND_STRIDE = 600
"""Engine priorities of band rank k span ENGINE_MIN_PRIORITY + [k, k + 1) x BAND_STRIDE."""
CLASS_STRIDE = 40
"""Inside a band, each TTFT rank (tighter first) spans CLASS_STRIDE priorities."""
TIE_BREAK_SPAN = CLASS_STRIDE // 2
"""The body's `priority` orders requests of one band and class: clamped to
[-TIE_BREAK_SPAN, TIE_BREAK_SPAN - 1] (lower first, as in vLLM)."""


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
    entitlement: Entitlement | None = None
    """What its requests may ask for (None: the anonymous entitlement; the fairness header is
    its only credential, so grant more only behind a gateway that sets the header)."""


def _default_objectives() -> dict[str, ObjectiveSpec]:
    return {
        "critical": ObjectiveSpec(criticality=1),
        "standard": ObjectiveSpec(criticality=0),
        "sheddable": ObjectiveSpec(criticality=-1),
    }


class TenancyConfig(BaseModel):
    """How tenants, bands, fairness ids and entitlements are read at the ingress."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objectives: dict[str, ObjectiveSpec] = Field(default_factory=_default_objectives)
    """Objective name -> band (and optional SLO class); default critical 1, standard 0,
    sheddable -1."""
    tenants: dict[str, TenantSpec] = Field(default_factory=dict)
    """Fairness id -> weight, quota and entitlement, for tenants identified by the fairness
    headers (never counted against max_header_tenants)."""
    fairness_headers: bool = True
    """Read the tenant from the fairness headers when the API key names none."""
    max_tenant_id_chars: int = Field(128, ge=1)
    """Longest fairness id accepted."""
    max_header_tenants: int = Field(256, ge=1)
    """Fairness ids that are neither configured nor an API key's tenant kept apart at once per
    ingress replica; further ones share overflow_tenant."""
    tenant_idle_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    """A header-named tenant unseen this long is forgotten (its place is freed), seconds."""
    overflow_tenant: str = Field("overflow", min_length=1)
    """The tenant every fairness id beyond max_header_tenants is served as."""
    anonymous: Entitlement = Field(default_factory=anonymous_entitlement)
    """What requests without an API key may ask for (also every request when no keys are
    configured): default up to the standard band, TTFT >= 1000 ms, TPOT >= 30 ms."""
    reserved_tenants: frozenset[str] = frozenset()
    """Fairness ids anonymous callers may not name (403); the API keys' tenants are added when
    the ingress's arguments load."""
    shed_admitting_fraction: float = Field(0.5, gt=0, le=1)
    """Sheddable requests are answered 429 at once when this fraction of
    max_admitting_requests is already in admission (the ingress is saturated)."""
    _table: TenantTable | None = PrivateAttr(None)

    @property
    def table(self) -> TenantTable:
        """This replica's table of header-named tenants (runtime state kept with the config
        object the replica holds; built on first use)."""
        if self._table is None:
            self._table = TenantTable(
                self.max_header_tenants, self.tenant_idle_s, self.overflow_tenant
            )
        return self._table

    def check_classes(self, classes: Mapping[str, object]) -> None:
        """ValueError when an objective names an SLO class that is not configured (start-up)."""
        for name, spec in self.objectives.items():
            if spec.slo_class is not None and spec.slo_class not in classes:
                raise ValueError(
                    f"tenancy.objectives.{name}.slo_class '{spec.slo_class}' is not one of "
                    f"{', '.join(sorted(classes))}"
                )

    def entitlements(self) -> dict[str, Entitlement]:
        """Where -> entitlement, for the start-up checks: anonymous and configured tenants."""
        out = {"tenancy.anonymous": self.anonymous}
        for name, spec in self.tenants.items():
            out[f"tenancy.tenants.{name}"] = spec.entitlement or self.anonymous
        return out

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


def fairness_id(
    key_tenant: str | None, headers: Mapping[str, str], cfg: TenancyConfig
) -> str | None:
    """The fairness id the headers name, validated, or None (no header, headers off, or a key
    identified the caller: its tenant wins). 400 for a malformed id; 403 for an API key's
    tenant named without its key."""
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
    if value in cfg.reserved_tenants:
        raise forbidden(name, f"tenant '{value}' has an API key; send the key, not its name")
    return value


def resolve_tenant(
    key_tenant: str | None,
    headers: Mapping[str, str],
    cfg: TenancyConfig,
    table: TenantTable | None = None,
) -> str | None:
    """The tenant the fairness headers name (a configured one as itself, others through the
    replica's bounded table: themselves or the overflow tenant), or None (use the key's tenant
    or "anonymous"). `key_tenant`: the tenant the API key names (None: no key identified the
    caller)."""
    value = fairness_id(key_tenant, headers, cfg)
    if value is None or value in cfg.tenants:
        return value
    return (table if table is not None else cfg.table).admit(value)


def resolve_objective(
    headers: Mapping[str, str], cfg: TenancyConfig
) -> tuple[str | None, int | None, str | None]:
    """(objective name, its criticality, its SLO class) from `x-gateway-inference-objective`,
    or (None, None, None) when it is absent; 400 for an unknown name."""
    found = _one_header(headers, (OBJECTIVE_HEADER,))
    if found is None:
        return None, None, None
    name, value = found
    spec = cfg.objectives.get(value)
    if spec is None:
        valid = ", ".join(sorted(cfg.objectives)) or "(none configured)"
        raise bad_request(name, f"unknown objective {value!r}; valid: {valid}")
    return value, spec.criticality, spec.slo_class


def band_rank(criticality: int) -> int:
    """0 for critical (> 0), 1 for standard (0), 2 for sheddable (< 0)."""
    if criticality > 0:
        return 0
    return 1 if criticality == 0 else 2


def engine_priority(
    criticality: int, slo: SLO, class_ttfts_s: list[float], tie_break: int = 0
) -> int:
    """vLLM's priority (lower first) for the replica: ENGINE_MIN_PRIORITY + BAND_STRIDE x band
    rank + CLASS_STRIDE x the rank of the request's TTFT SLO among the configured classes'
    (ascending; tighter first) + the body's priority `tie_break` (vLLM's meaning, lower first,
    clamped to +-TIE_BREAK_SPAN)."""
    ttft = slo.ttft_deadline_s
    rank = sum(1 for t in sorted(set(class_ttfts_s)) if t < ttft - 1e-9)
    if not math.isfinite(ttft):
        rank = len(class_ttfts_s)
    rank = min(rank, BAND_STRIDE // CLASS_STRIDE - 1)
    tie = min(max(tie_break, -TIE_BREAK_SPAN), TIE_BREAK_SPAN - 1) + TIE_BREAK_SPAN
    return ENGINE_MIN_PRIORITY + BAND_STRIDE * band_rank(criticality) + CLASS_STRIDE * rank + tie


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
    tie_break: int = 0
    """The body's `priority` (vLLM's meaning: lower first), a tie-break inside band and class."""
    entitlement: Entitlement | None = None
    """What the caller may ask for (None: not checked; the Batch API settles its own)."""
    slo_sources: SLOSources = NO_SLO_SOURCES
    """Where the SLO may have come from besides the body (names the field of a 403)."""
    clamped: tuple[str, ...] = ()
    """Clamp notes of the band ("criticality=1->0")."""

    @property
    def sheddable(self) -> bool:
        return self.criticality < 0

    def entitled(
        self, request: Request, class_ttfts_s: list[float]
    ) -> tuple[Request, dict[str, str]]:
        """`request` with this band and weight, its SLO checked against the entitlement (403
        naming the field above it, or clamped) and the engine priority they give; plus the
        response headers to send (CLAMP_HEADER when something was clamped)."""
        slo, notes = request.slo, list(self.clamped)
        if self.entitlement is not None:
            slo, slo_notes = entitled_slo(slo, self.entitlement, self.slo_sources)
            notes += slo_notes
        prio = self.fixed_engine_priority
        if prio is None:
            prio = engine_priority(self.criticality, slo, class_ttfts_s, self.tie_break)
        out = replace(
            request,
            slo=slo,
            criticality=self.criticality,
            tenant_weight=self.weight,
            priority=prio,
        )
        return out, ({CLAMP_HEADER: "; ".join(notes)} if notes else {})

    def apply(self, request: Request, class_ttfts_s: list[float]) -> Request:
        """`entitled` without the response headers."""
        return self.entitled(request, class_ttfts_s)[0]


def resolve_tenancy(
    key_tenant: str | None,
    key_weight: float,
    key_tokens_per_minute: int | None,
    headers: Mapping[str, str],
    body_priority: int,
    cfg: TenancyConfig,
    anonymous: str = ANONYMOUS,
    key_entitlement: Entitlement | None = None,
    table: TenantTable | None = None,
) -> Tenancy:
    """Tenant, weight, quota, entitlement and band of a request (module docstring). `key_*`:
    what the API key's entry says (key_tenant None: no key identified the caller; its
    entitlement None: anything). `body_priority` is only the tie-break."""
    from_header = resolve_tenant(key_tenant, headers, cfg, table)
    if from_header is not None:
        spec = cfg.tenants.get(from_header)
        if spec is None:  # an unconfigured id, or the overflow tenant
            tenant, weight, quota, ent = from_header, 1.0, None, cfg.anonymous
        else:
            tenant, weight, quota = from_header, spec.weight, spec.tokens_per_minute
            ent = spec.entitlement or cfg.anonymous
    elif key_tenant is not None:
        tenant, weight, quota = key_tenant, key_weight, key_tokens_per_minute
        ent = key_entitlement or Entitlement()
    else:
        tenant, weight, quota, ent = anonymous, key_weight, key_tokens_per_minute, cfg.anonymous
    objective, requested, slo_class = resolve_objective(headers, cfg)
    criticality, note = entitled_criticality(objective, requested, ent)
    return Tenancy(
        tenant,
        weight,
        quota,
        criticality,
        slo_class,
        tie_break=body_priority,
        entitlement=ent,
        slo_sources=SLOSources.of(headers, slo_class),
        clamped=(note,) if note else (),
    )


def admit_tenancy(
    key: Principal,
    headers: Mapping[str, str],
    body_priority: int,
    cfg: TenancyConfig,
    admitting: int,
    max_admitting: int,
) -> tuple[Principal, Tenancy]:
    """The request's principal (tenant, weight, quota, entitlement) and tenancy, from the API
    key's principal `key`. Sheddable traffic goes first under saturation: 429 (drop reason
    "sheddable-saturated") at once, before any internal call, while more than
    shed_admitting_fraction of max_admitting requests are in admission."""
    ten = resolve_tenancy(
        None if key.tenant == ANONYMOUS else key.tenant,
        key.weight,
        key.tokens_per_minute,
        headers,
        body_priority,
        cfg,
        key_entitlement=key.entitlement,
    )
    if ten.sheddable and admitting > cfg.shed_admitting_fraction * max_admitting:
        raise overloaded(
            f"shed: sheddable request (criticality {ten.criticality}) while the ingress is "
            f"saturated ({admitting} requests in admission)",
            1.0,
            drop_reason="sheddable-saturated",
        )
    principal = Principal(
        ten.tenant, key.default_class, ten.tokens_per_minute, ten.weight, ten.entitlement
    )
    return principal, ten
