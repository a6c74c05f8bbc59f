"""Entitlements: what a caller may ask for, and what happens to a request that asks for more.

An API key's entry, a configured fairness-id tenant and anonymous traffic each carry an
`Entitlement`: the highest criticality (band) its requests may name, the band of its requests
that name none, and the tightest TTFT and TPOT objectives it may request (from an SLO class, the
body's `slo` object or the `x-slo-*` headers). A request above it is answered 403
(`permission_error`, code `entitlement_exceeded`) naming the field and the limit, or, with
`over_limit: clamp`, served at the limit with a response header (`CLAMP_HEADER`) that says
what changed. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.errors import APIError
from services.ingress.core.slo import CUSTOM_CLASS, HEADER_ALIASES, TPOT_HEADER, TTFT_HEADER
from shared.domain import SLO

OBJECTIVE_HEADER = "x-gateway-inference-objective"
CLAMP_HEADER = "x-slomesh-entitlement-clamped"
"""Response header of a clamped request: "<field>=<asked>-><granted>", "; "-separated."""
PERMISSION_ERROR = "permission_error"
ENTITLEMENT_CODE = "entitlement_exceeded"


class Entitlement(BaseModel):
    """What a caller may ask for (defaults: anything; anonymous traffic gets
    `TenancyConfig.anonymous`, which is conservative)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_criticality: int = Field(1000, ge=-1000, le=1000)
    """Highest criticality its requests may name in `x-gateway-inference-objective` (with the
    default objectives: 1 critical, 0 standard, -1 sheddable)."""
    default_criticality: int = Field(0, ge=-1000, le=1000)
    """Criticality of its requests that name no objective (at most max_criticality)."""
    min_ttft_ms: float | None = Field(None, gt=0)
    """Tightest TTFT objective its requests may carry, ms (None: any the SLO limits allow)."""
    min_tpot_ms: float | None = Field(None, gt=0)
    """Tightest TPOT objective its requests may carry, ms (None: any the SLO limits allow)."""
    over_limit: Literal["reject", "clamp"] = "reject"
    """A request above the entitlement: `reject` (403 naming the field and the limit) or
    `clamp` (served at the limit; the response header x-slomesh-entitlement-clamped says
    what was changed)."""

    @model_validator(mode="after")
    def _default_within(self) -> Self:
        if self.default_criticality > self.max_criticality:
            raise ValueError(
                f"default_criticality {self.default_criticality} is above max_criticality "
                f"{self.max_criticality}"
            )
        return self

    def check_slo(self, slo: SLO, where: str) -> None:
        """ValueError when a configured default SLO (`where` names it) is tighter than this
        entitlement allows (a start-up check: defaults never earn a 403)."""
        ttft_ms = slo.ttft_deadline_s * 1e3
        if self.min_ttft_ms is not None and ttft_ms < self.min_ttft_ms - 1e-9:
            raise ValueError(
                f"{where}: TTFT {_ms(ttft_ms)} ms is tighter than the entitlement's "
                f"min_ttft_ms {_ms(self.min_ttft_ms)}"
            )
        tpot = slo.tpot_target_s
        if self.min_tpot_ms is not None and tpot is not None and tpot * 1e3 < self.min_tpot_ms:
            raise ValueError(
                f"{where}: TPOT {_ms(tpot * 1e3)} ms is tighter than the entitlement's "
                f"min_tpot_ms {_ms(self.min_tpot_ms)}"
            )


def anonymous_entitlement() -> Entitlement:
    """The default for anonymous traffic: up to the standard band (no critical), TTFT >= 1 s
    (not the `tight` class, 500 ms), TPOT >= 30 ms (above it:
    `chat` and `tight`, 50 ms)."""
    return Entitlement(max_criticality=0, min_ttft_ms=1000.0, min_tpot_ms=30.0)


def forbidden(param: str, rule: str) -> APIError:
    """403 permission_error, code entitlement_exceeded, message "<param>: <rule>"."""
    return APIError(403, f"{param}: {rule}", PERMISSION_ERROR, param, ENTITLEMENT_CODE)


def _ms(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else f"{value:g}"


def entitled_criticality(
    objective: str | None, requested: int | None, ent: Entitlement
) -> tuple[int, str | None]:
    """(criticality, clamp note or None) of a request that named `objective` (criticality
    `requested`; None: named none, so the entitlement's default). 403 above the limit unless
    the entitlement clamps."""
    if requested is None:
        return ent.default_criticality, None
    if requested <= ent.max_criticality:
        return requested, None
    if ent.over_limit == "clamp":
        return ent.max_criticality, f"criticality={requested}->{ent.max_criticality}"
    raise forbidden(
        OBJECTIVE_HEADER,
        f"objective '{objective}' (criticality {requested}) is above what this caller may ask "
        f"for (highest criticality {ent.max_criticality})",
    )


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class SLOSources:
    """Where a request's SLO may have come from besides the body (to name the field of a 403):
    the SLO headers it sent (name as sent, value ms) and its objective's SLO class."""

    ttft_header: tuple[str, float | None] | None = None
    tpot_header: tuple[str, float | None] | None = None
    objective_class: str | None = None

    @classmethod
    def of(cls, headers: Mapping[str, str], objective_class: str | None) -> SLOSources:
        """Read from a request's headers (values that do not parse count as absent here; the
        SLO resolution answers them 400)."""
        ttft: tuple[str, float | None] | None = None
        tpot: tuple[str, float | None] | None = None
        for raw, value in headers.items():
            name = raw.lower()
            canonical = HEADER_ALIASES.get(name, name)
            if canonical == TTFT_HEADER and ttft is None:
                ttft = (name, _number(value))
            elif canonical == TPOT_HEADER and tpot is None:
                tpot = (name, _number(value))
        return cls(ttft, tpot, objective_class)

    def param(self, slo: SLO, field: Literal["ttft", "tpot"], value_ms: float) -> str:
        """The request field that set `field` of `slo` to `value_ms`."""
        if slo.class_name != CUSTOM_CLASS:
            return OBJECTIVE_HEADER if slo.class_name == self.objective_class else "slo"
        header = self.ttft_header if field == "ttft" else self.tpot_header
        if header is not None and header[1] is not None and abs(header[1] - value_ms) < 1e-6:
            return header[0]
        deadline = slo.e2e_deadline_s
        if field == "ttft" and deadline is not None and abs(deadline * 1e3 - value_ms) < 1e-6:
            return "slo.deadline_ms"  # no TTFT sent: the deadline capped the class's TTFT
        return f"slo.{field}_ms"


def entitled_slo(slo: SLO, ent: Entitlement, sources: SLOSources) -> tuple[SLO, list[str]]:
    """`slo` within `ent` and the clamp notes: 403 naming the field when it asks for a tighter
    TTFT or TPOT than allowed, unless the entitlement clamps (then the objective is raised to
    the limit, the class becomes "custom" and a deadline below the new TTFT rises with it)."""
    notes: list[str] = []
    ttft_ms = slo.ttft_deadline_s * 1e3
    tpot_ms = None if slo.tpot_target_s is None else slo.tpot_target_s * 1e3
    new_ttft, new_tpot = ttft_ms, tpot_ms
    if ent.min_ttft_ms is not None and ttft_ms < ent.min_ttft_ms - 1e-9:
        param = sources.param(slo, "ttft", ttft_ms)
        if ent.over_limit == "reject":
            raise forbidden(
                param,
                f"TTFT objective {_ms(ttft_ms)} ms is tighter than this caller may ask for "
                f"(at least {_ms(ent.min_ttft_ms)} ms)",
            )
        new_ttft = ent.min_ttft_ms
        notes.append(f"{param}={_ms(ttft_ms)}->{_ms(new_ttft)}")
    if ent.min_tpot_ms is not None and tpot_ms is not None and tpot_ms < ent.min_tpot_ms - 1e-9:
        param = sources.param(slo, "tpot", tpot_ms)
        if ent.over_limit == "reject":
            raise forbidden(
                param,
                f"TPOT objective {_ms(tpot_ms)} ms is tighter than this caller may ask for "
                f"(at least {_ms(ent.min_tpot_ms)} ms)",
            )
        new_tpot = ent.min_tpot_ms
        notes.append(f"{param}={_ms(tpot_ms)}->{_ms(new_tpot)}")
    if not notes:
        return slo, notes
    deadline = slo.e2e_deadline_s
    if deadline is not None:
        deadline = max(deadline, new_ttft / 1e3)
    clamped = replace(
        slo,
        ttft_deadline_s=new_ttft / 1e3,
        tpot_target_s=None if new_tpot is None else new_tpot / 1e3,
        e2e_deadline_s=deadline,
        class_name=CUSTOM_CLASS,
    )
    return clamped, notes
