"""SCLS adaptive schedule interval (SCLS §4.6, Eq. 12): T <- max(λ·min_w load(w), Γ).

Light loads shorten the interval so requests do not wait in the pool; heavy loads lengthen it so
the batcher sees more requests at once. λ < 1 keeps workers from idling when loads are
over-estimated; Γ keeps the batcher from being fed too few requests when they are under-estimated.
The paper uses λ = 0.5 and Γ = 6 s (HF) / 3 s (DeepSpeed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def adaptive_interval_s(
    loads: Mapping[str, float], lam: float = 0.5, min_interval_s: float = 3.0
) -> float:
    """Seconds until the next scheduling round, from each instance's outstanding load (seconds)."""
    if not loads:
        raise ValueError("loads must not be empty: the interval needs at least one instance")
    if not (math.isfinite(lam) and 0 < lam <= 1):
        raise ValueError(f"lam must be in (0, 1], got {lam!r}")
    if not (math.isfinite(min_interval_s) and min_interval_s > 0):
        raise ValueError(f"min_interval_s must be finite and > 0, got {min_interval_s!r}")
    for name, load in loads.items():
        if not math.isfinite(load):
            raise ValueError(f"loads[{name!r}] must be finite, got {load!r}")
    return float(max(lam * min(loads.values()), min_interval_s))
