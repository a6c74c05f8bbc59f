"""Named SLO classes from the papers, turned into `shared.domain.SLO` objects.

QLM (§8; p99 TTFT deadlines, no TPOT SLO):
    "interactive"  TTFT 20 s
    "batch-1"      TTFT 60 s
    "batch-2"      TTFT 3600 s (1 hour)

SCORPIO (§3; the classes its authors use when a trace has none; TTFT deadline and TPOT target):
    "tight"        TTFT 0.5 s, TPOT 50 ms   (latency-critical: fast first token)
    "chat"         TTFT 3 s,   TPOT 30 ms   (streaming chat: smooth, fast tokens)
    "relaxed"      TTFT 15 s,  TPOT 50 ms   (tolerant of queueing)

UELLM (§5; end-to-end deadlines; the reference code draws SLOs of 90-300 s):
    "e2e-90"       end-to-end 90 s (TTFT deadline = the same 90 s)
    "e2e-180"      end-to-end 180 s
    "e2e-300"      end-to-end 300 s

Look a class up with `get_slo_class(name)` (ValueError listing the valid names when unknown) or
`CLASS_PRESETS[name]` (KeyError listing them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.domain import SLO


@dataclass(frozen=True, slots=True)
class SLOClass:
    """A named SLO class. Times in seconds after arrival; None means no SLO of that kind."""

    name: str
    ttft_deadline_s: float
    tpot_target_s: float | None = None
    e2e_deadline_s: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("name must be non-empty")
        for field_name in ("ttft_deadline_s", "tpot_target_s", "e2e_deadline_s"):
            value = getattr(self, field_name)
            if value is None and field_name != "ttft_deadline_s":
                continue
            if value is None or not (math.isfinite(value) and value > 0):
                raise ValueError(f"{field_name} must be > 0 and finite, got {value}")

    def to_slo(self) -> SLO:
        """The domain SLO carrying this class's deadlines and name."""
        return SLO(
            ttft_deadline_s=self.ttft_deadline_s,
            tpot_target_s=self.tpot_target_s,
            e2e_deadline_s=self.e2e_deadline_s,
            class_name=self.name,
        )


class _Presets(dict[str, SLOClass]):
    """A dict whose missing-key error lists the valid names."""

    def __missing__(self, key: str) -> SLOClass:
        raise KeyError(f"unknown SLO class '{key}'; valid: {', '.join(sorted(self))}")


QLM_CLASSES: tuple[SLOClass, ...] = (
    SLOClass("interactive", ttft_deadline_s=20.0),
    SLOClass("batch-1", ttft_deadline_s=60.0),
    SLOClass("batch-2", ttft_deadline_s=3600.0),
)

SCORPIO_CLASSES: tuple[SLOClass, ...] = (
    SLOClass("tight", ttft_deadline_s=0.5, tpot_target_s=0.050),
    SLOClass("chat", ttft_deadline_s=3.0, tpot_target_s=0.030),
    SLOClass("relaxed", ttft_deadline_s=15.0, tpot_target_s=0.050),
)

UELLM_CLASSES: tuple[SLOClass, ...] = tuple(
    SLOClass(f"e2e-{s}", ttft_deadline_s=float(s), e2e_deadline_s=float(s)) for s in (90, 180, 300)
)

CLASS_PRESETS: dict[str, SLOClass] = _Presets(
    {c.name: c for c in QLM_CLASSES + SCORPIO_CLASSES + UELLM_CLASSES}
)


def get_slo_class(name: str) -> SLOClass:
    """The preset SLO class called `name`; ValueError listing the valid names if there is none."""
    if name not in CLASS_PRESETS:
        raise ValueError(f"unknown SLO class '{name}'; valid: {', '.join(sorted(CLASS_PRESETS))}")
    return CLASS_PRESETS[name]
