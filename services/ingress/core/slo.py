"""SLO resolution: from a request's body, headers and API key to a `shared.domain.SLO` (seconds).

Precedence, first match wins (sources are not merged field by field):
  1. body `slo` object {ttft_ms, tpot_ms, deadline_ms}
  2. body `slo` class name
  3. headers `x-slo-ttft-ms` / `x-slo-tpot-ms` (Gateway API Inference Extension names;
     case-insensitive), or llm-d's `x-llm-d-slo-ttft-ms` / `x-llm-d-slo-tpot-ms`
  4. the API key's default class
  5. the policy's default class
Explicit objectives (1, 3) leave out what the client did not send (no TPOT / deadline objective),
except TTFT, which every request needs: it comes from the fallback class (4, else 5), capped by an
explicit deadline. Explicit objectives get class_name "custom". Every value is checked against the
policy's limits; violations are APIError 400 naming the field and the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.ingress.core.errors import APIError, bad_request, server_error
from services.ingress.core.openai_schema import SLOObject
from shared.domain import SLO
from shared.workloads.slo_classes import CLASS_PRESETS

TTFT_HEADER = "x-slo-ttft-ms"
TPOT_HEADER = "x-slo-tpot-ms"
HEADER_ALIASES = {"x-llm-d-slo-ttft-ms": TTFT_HEADER, "x-llm-d-slo-tpot-ms": TPOT_HEADER}
"""llm-d's names for the same objectives; sent with ours, the values must agree."""
CUSTOM_CLASS = "custom"
_DAY_MS = 86_400_000.0

_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SLOClassSpec(BaseModel):
    """One named SLO class, milliseconds after arrival."""

    model_config = _CONFIG

    ttft_ms: float = Field(gt=0)
    """Time to first token allowed after arrival, ms."""
    tpot_ms: float | None = Field(None, gt=0)
    """Mean time per output token allowed after the first, ms (None: no TPOT objective)."""
    deadline_ms: float | None = Field(None, gt=0)
    """Whole-request latency allowed after arrival, ms (None: no deadline)."""


class SLOLimits(BaseModel):
    """Bounds on any objective a client may ask for (and on the configured classes)."""

    model_config = _CONFIG

    min_ttft_ms: float = Field(1.0, gt=0)
    """Smallest TTFT a request may ask for, ms."""
    max_ttft_ms: float = Field(_DAY_MS, gt=0)
    """Largest TTFT a request may ask for, ms (default 24 h)."""
    min_tpot_ms: float = Field(0.1, gt=0)
    """Smallest TPOT a request may ask for, ms."""
    max_tpot_ms: float = Field(60_000.0, gt=0)
    """Largest TPOT a request may ask for, ms (default 1 min per token)."""
    max_deadline_ms: float = Field(_DAY_MS, gt=0)
    """Largest whole-request deadline a request may ask for, ms (default 24 h)."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_ttft_ms > self.max_ttft_ms:
            raise ValueError("min_ttft_ms must be <= max_ttft_ms")
        if self.min_tpot_ms > self.max_tpot_ms:
            raise ValueError("min_tpot_ms must be <= max_tpot_ms")
        if self.max_deadline_ms < self.min_ttft_ms:
            raise ValueError("max_deadline_ms must be >= min_ttft_ms")
        return self


def _paper_classes(names: tuple[str, ...] | None = None) -> dict[str, SLOClassSpec]:
    """The papers' classes (shared presets: QLM, SCORPIO, UELLM) in milliseconds, all of them
    or those named."""

    def ms(s: float | None) -> float | None:
        return None if s is None else s * 1000.0

    return {
        name: SLOClassSpec(
            ttft_ms=c.ttft_deadline_s * 1000.0,
            tpot_ms=ms(c.tpot_target_s),
            deadline_ms=ms(c.e2e_deadline_s),
        )
        for name, c in CLASS_PRESETS.items()
        if names is None or name in names
    }


PRODUCT_CLASSES: dict[str, SLOClassSpec] = {
    "chat": SLOClassSpec(ttft_ms=1000.0, tpot_ms=50.0),
    "tight": SLOClassSpec(ttft_ms=500.0, tpot_ms=50.0),
    "relaxed": SLOClassSpec(ttft_ms=15_000.0, tpot_ms=50.0),
    "batch": SLOClassSpec(ttft_ms=600_000.0),
}
"""The classes sized for today's uses: `chat` (the first token within a second, then 20 tokens
a second, faster than anyone reads), `tight` (latency-critical, SCORPIO's), `relaxed` (tolerates
queueing, SCORPIO's) and `batch` (minutes: offline work; the Batch API's requests carry this
name with their batch's expiry as deadline)."""

QLM_CLASS_NAMES = ("interactive", "batch-1", "batch-2")
UELLM_CLASS_NAMES = ("e2e-90", "e2e-180", "e2e-300")


def class_set(name: str) -> tuple[dict[str, SLOClassSpec], str]:
    """The classes and default class of a named set (see `SLOPolicy.class_set`)."""
    if name == "default":
        kept = _paper_classes(QLM_CLASS_NAMES + UELLM_CLASS_NAMES)
        return {**PRODUCT_CLASSES, **kept}, "chat"
    if name == "qlm":
        return _paper_classes(QLM_CLASS_NAMES), "interactive"
    if name == "papers":
        return _paper_classes(), "interactive"
    raise ValueError(f"unknown class_set '{name}'; valid: default, papers, qlm")


ClassSetName = Literal["default", "qlm", "papers"]


class SLOPolicy(BaseModel):
    """How the ingress turns what a client sent into objectives."""

    model_config = _CONFIG

    class_set: ClassSetName = "default"
    """Where `classes` and `default_class` come from when the config leaves them out:
    "default" (chat 1 s TTFT / 50 ms TPOT, the default class; tight; relaxed; batch, 10 min;
    and QLM's and UELLM's classes under their names), "qlm" (QLM's paper classes only:
    interactive 20 s, the default, batch-1 60 s, batch-2 1 h) or "papers" (every paper's
    class with the papers' values, SCORPIO's chat 3 s / 30 ms among them; default
    interactive)."""
    classes: dict[str, SLOClassSpec] = Field(default_factory=lambda: class_set("default")[0])
    """Named classes clients (and API keys) may pick; default: those of `class_set`."""
    default_class: str = "chat"
    """Class used when neither the request nor its API key says anything; default: that of
    `class_set` (chat, a plain client gets chat latency)."""
    limits: SLOLimits = Field(default_factory=SLOLimits)
    """Bounds on explicit objectives and on the classes above."""

    @model_validator(mode="before")
    @classmethod
    def _from_class_set(cls, data: Any) -> Any:
        """Fill `classes` and `default_class` from `class_set` where the config leaves them
        out (a `classes` given without `default_class` keeps the set's default only when it
        is one of them)."""
        if not isinstance(data, dict):
            return data
        classes, default = class_set(str(data.get("class_set", "default")))
        out = dict(data)
        out.setdefault("classes", classes)
        given = out["classes"]
        if "default_class" not in out and isinstance(given, dict) and default in given:
            out["default_class"] = default
        return out

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if not self.classes:
            raise ValueError("classes must not be empty")
        if self.default_class not in self.classes:
            raise ValueError(
                f"default_class '{self.default_class}' is not one of the classes: "
                f"{', '.join(sorted(self.classes))}"
            )
        if CUSTOM_CLASS in self.classes:
            raise ValueError(f"'{CUSTOM_CLASS}' is reserved for explicit objectives")
        for name, spec in self.classes.items():
            if not name.strip():
                raise ValueError("class names must be non-empty")
            try:
                _check_explicit(
                    spec.ttft_ms, spec.tpot_ms, spec.deadline_ms, self.limits, f"classes.{name}."
                )
            except APIError as err:
                raise ValueError(err.message) from None
        return self


def _ms(value: float) -> str:
    """A millisecond value for messages: integral ones without exponent (86400000)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}"


def _check_value(value: float, lo: float | None, hi: float, param: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise bad_request(param, f"must be a positive number of milliseconds, got {value!r}")
    if lo is not None and value < lo:
        raise bad_request(param, f"must be >= {_ms(lo)} ms, got {_ms(value)}")
    if value > hi:
        raise bad_request(param, f"must be <= {_ms(hi)} ms, got {_ms(value)}")


def _check_explicit(
    ttft_ms: float, tpot_ms: float | None, deadline_ms: float | None, lim: SLOLimits, prefix: str
) -> None:
    """Check explicit values; prefix names the source ("slo." for the body, "" for headers)."""
    ttft_param = f"{prefix}ttft_ms" if prefix else TTFT_HEADER
    tpot_param = f"{prefix}tpot_ms" if prefix else TPOT_HEADER
    _check_value(ttft_ms, lim.min_ttft_ms, lim.max_ttft_ms, ttft_param)
    if tpot_ms is not None:
        _check_value(tpot_ms, lim.min_tpot_ms, lim.max_tpot_ms, tpot_param)
    if deadline_ms is not None:
        _check_value(deadline_ms, None, lim.max_deadline_ms, f"{prefix}deadline_ms")
        if deadline_ms < ttft_ms:
            raise bad_request(
                f"{prefix}deadline_ms",
                f"must be >= the TTFT objective ({_ms(ttft_ms)} ms), got {_ms(deadline_ms)}",
            )


def parse_slo_headers(headers: Mapping[str, str]) -> dict[str, float]:
    """The SLO headers present, by canonical lower-case name (llm-d's aliases folded in), parsed
    as milliseconds (APIError 400 naming the header for a non-numeric, non-finite or
    non-positive value, or conflicting duplicates, also between a header and its alias)."""
    seen: dict[str, tuple[str, str]] = {}
    for raw_name, raw_value in headers.items():
        name = raw_name.lower()
        canonical = HEADER_ALIASES.get(name, name)
        if canonical not in (TTFT_HEADER, TPOT_HEADER):
            continue
        if canonical in seen and not _same(seen[canonical][1], raw_value):
            first, text = seen[canonical]
            what = "sent twice" if first == name else f"and {first} sent"
            raise bad_request(
                name, f"{what} with different values: {text.strip()!r}, {raw_value.strip()!r}"
            )
        seen.setdefault(canonical, (name, raw_value))
    out: dict[str, float] = {}
    for canonical, (name, raw_value) in seen.items():
        value = _num(raw_value)
        if not (math.isfinite(value) and value > 0):
            raise bad_request(
                name, f"must be a positive number of milliseconds, got {raw_value.strip()!r}"
            )
        out[canonical] = value
    return out


def _same(a: str, b: str) -> bool:
    """Two header values that say the same (equal numbers, or equal text)."""
    x, y = _num(a), _num(b)
    return x == y or a.strip() == b.strip()


def _num(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        return math.nan


def _class_slo(name: str, policy: SLOPolicy) -> SLO:
    spec = policy.classes[name]
    return SLO(
        ttft_deadline_s=spec.ttft_ms / 1000.0,
        tpot_target_s=None if spec.tpot_ms is None else spec.tpot_ms / 1000.0,
        e2e_deadline_s=None if spec.deadline_ms is None else spec.deadline_ms / 1000.0,
        class_name=name,
    )


def _explicit_slo(
    ttft_ms: float | None,
    tpot_ms: float | None,
    deadline_ms: float | None,
    fallback: str,
    policy: SLOPolicy,
    prefix: str,
) -> SLO:
    if ttft_ms is None:
        ttft_ms = policy.classes[fallback].ttft_ms
        if deadline_ms is not None and deadline_ms > 0:
            ttft_ms = min(ttft_ms, deadline_ms)
    _check_explicit(ttft_ms, tpot_ms, deadline_ms, policy.limits, prefix)
    return SLO(
        ttft_deadline_s=ttft_ms / 1000.0,
        tpot_target_s=None if tpot_ms is None else tpot_ms / 1000.0,
        e2e_deadline_s=None if deadline_ms is None else deadline_ms / 1000.0,
        class_name=CUSTOM_CLASS,
    )


def resolve_slo(
    body_slo: str | SLOObject | None,
    headers: Mapping[str, str],
    key_default_class: str | None,
    policy: SLOPolicy,
) -> SLO:
    """The request's objectives by the precedence in the module docstring (seconds, as
    `shared.domain.SLO` wants). APIError 400 for an unknown class or a bad value; 500 when the
    API key's configured default class does not exist (a server misconfiguration)."""
    if key_default_class is not None and key_default_class not in policy.classes:
        raise server_error(
            f"the API key's default SLO class '{key_default_class}' is not configured"
        )
    fallback = key_default_class if key_default_class is not None else policy.default_class
    if isinstance(body_slo, SLOObject):
        return _explicit_slo(
            body_slo.ttft_ms, body_slo.tpot_ms, body_slo.deadline_ms, fallback, policy, "slo."
        )
    if isinstance(body_slo, str):
        if body_slo not in policy.classes:
            raise bad_request(
                "slo",
                f"unknown SLO class '{body_slo}'; valid: {', '.join(sorted(policy.classes))}",
            )
        return _class_slo(body_slo, policy)
    from_headers = parse_slo_headers(headers)
    if from_headers:
        return _explicit_slo(
            from_headers.get(TTFT_HEADER), from_headers.get(TPOT_HEADER), None, fallback, policy, ""
        )
    return _class_slo(fallback, policy)
