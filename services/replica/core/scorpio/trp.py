"""TPOT relative proportionality (SCORPIO §3.4, Definition 1; see services/replica/README.md).

TRP(r) = min_{r'∈R} STP(r') / STP(r) ∈ (0, 1], where STP(r) is the TPOT SLO of request r and R
the set considered (the running set for batching, R ∪ {w} for admission). The tightest request has
TRP 1; a request whose STP is k times looser has TRP 1/k and needs only that share of iterations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def trp(stps: Sequence[float]) -> list[float]:
    """TRP of each STP (seconds per token) relative to the smallest one, in input order.

    Raises ValueError naming `stp` if any value is not finite or not > 0; [] for empty input.
    """
    for i, stp in enumerate(stps):
        if not (math.isfinite(stp) and stp > 0):
            raise ValueError(f"stp[{i}] must be finite and > 0, got {stp!r}")
    if not stps:
        return []
    tightest = min(stps)
    return [tightest / stp for stp in stps]
