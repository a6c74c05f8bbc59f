"""Credit-based batching (SCORPIO §3.4; see services/replica/README.md).

Each decode iteration, over the running requests R ready to decode:
    C_r += TRP(r);   B = {r : C_r >= 1};   C_r -= 1 for r in B.
TRP is recomputed over R every iteration, so the rates adapt when the tightest request leaves or a
tighter one joins. A request's batching frequency converges to its TRP: with STPs 2, 4, 6 the
requests run every, every 2nd and every 3rd iteration. Credits start at 0 (so a TRP-1 request runs
on its first iteration); the >= 1 test uses a small epsilon to absorb float drift (3 × 1/3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from services.replica.core.scorpio.trp import trp


class CreditBatcher:
    """Holds each running request's credit and picks the requests to decode each iteration."""

    def __init__(self, epsilon: float = 1e-9) -> None:
        if not (math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
        self._epsilon = epsilon
        self._credits: dict[str, float] = {}

    def select(self, running: Sequence[tuple[str, float]]) -> list[str]:
        """One iteration: credit each (request_id, stp_s) by its TRP, return those with credit >= 1.

        `running` lists every running request ready to decode this iteration; ids held from
        earlier iterations but absent now are forgotten. The selected ids are returned in input
        order and pay one credit each. Raises ValueError on a repeated id or an invalid STP.
        """
        ids = [request_id for request_id, _ in running]
        seen: set[str] = set()
        for request_id in ids:
            if request_id in seen:
                raise ValueError(f"request id {request_id!r} appears more than once in `running`")
            seen.add(request_id)
        rates = trp([stp for _, stp in running])
        self._credits = {i: self._credits.get(i, 0.0) for i in ids}
        selected: list[str] = []
        threshold = 1.0 - self._epsilon
        for request_id, rate in zip(ids, rates, strict=True):
            credit = self._credits[request_id] + rate
            if credit >= threshold:
                credit -= 1.0
                selected.append(request_id)
            self._credits[request_id] = credit
        return selected

    def forget(self, request_id: str) -> None:
        """Drop the credit held for `request_id` (no-op if unknown)."""
        self._credits.pop(request_id, None)

    def credit(self, request_id: str) -> float:
        """The credit currently held for `request_id`; 0.0 if unknown."""
        return self._credits.get(request_id, 0.0)
