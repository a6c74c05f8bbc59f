"""The ingress's fast rejection under overload: remember the scheduler's "no" for a moment.

When the scheduler rejects a request because its queue cannot reach it in time
(`deadline-infeasible`), is full (`queue-full`) or sheds its band (`sheddable-saturated`), a
later request with the same admission key (model, TTFT objective,
criticality band) would be rejected for the same reason until the queue drains: the
scheduler's check counts the queued requests due no later than the arrival, and a later
arrival of the same key is due later. For `hold_off_s` after such a rejection (capped by its
Retry-After) the gate answers requests of that key 429 at once, before the predictor and the
scheduler are called; the first request after the hold-off asks the scheduler again, and any
admission of the key opens the gate. Under 5x overload most requests are rejected, and each
skipped predict + admit round trip is CPU the admitted ones keep (loadtest/overload.py).

Pure logic: the caller passes the clock.
"""

from __future__ import annotations

from dataclasses import dataclass

GATED_DROP_REASONS = frozenset({"deadline-infeasible", "queue-full", "sheddable-saturated"})
"""Scheduler drop reasons that say the queue, not the request, is the obstacle. Not
`replicas-full` (every replica at its in-flight cap): one finished request lifts that."""


@dataclass(frozen=True)
class GateKey:
    """Requests the scheduler judges alike: same model, TTFT objective and band."""

    model: str
    ttft_ms: int
    criticality: int


@dataclass(frozen=True)
class Held:
    """A closed gate's answer: why, and when to retry."""

    drop_reason: str
    retry_after_s: float
    reason: str


class RejectGate:
    """Per admission key, the time until which requests are answered 429 without asking the
    scheduler (see the module docstring). hold_off_s <= 0 disables the gate."""

    def __init__(self, hold_off_s: float, max_keys: int = 1024) -> None:
        self.hold_off_s = hold_off_s
        self.max_keys = max_keys
        """Closed keys kept at most (custom TTFT objectives make keys without bound): past it,
        expired ones go, then the oldest."""
        self._closed: dict[GateKey, tuple[float, Held]] = {}
        self.held = 0
        """Requests answered by the gate (never sent to the scheduler)."""

    def __len__(self) -> int:
        """Keys held closed (some may have expired, not yet swept)."""
        return len(self._closed)

    def check(self, key: GateKey, now_s: float) -> Held | None:
        """The gate's answer for a request of `key` now: None to ask the scheduler."""
        entry = self._closed.get(key)
        if entry is None:
            return None
        until_s, held = entry
        if now_s >= until_s:
            del self._closed[key]
            return None
        self.held += 1
        return held

    def observe(
        self,
        key: GateKey,
        admitted: bool,
        drop_reason: str,
        retry_after_s: float,
        reason: str,
        now_s: float,
    ) -> None:
        """The scheduler's verdict on a request of `key`: an admission opens the gate; a
        rejection for a queue-wide reason closes it for min(hold_off_s, retry_after_s)."""
        if admitted:
            self._closed.pop(key, None)
            return
        if self.hold_off_s <= 0 or drop_reason not in GATED_DROP_REASONS or retry_after_s <= 0:
            return
        hold_s = min(self.hold_off_s, retry_after_s)
        self._closed.pop(key, None)  # re-inserted last: the dict's order is closing order
        if len(self._closed) >= self.max_keys:
            self._closed = {k: v for k, v in self._closed.items() if v[0] > now_s}
            while len(self._closed) >= self.max_keys:
                del self._closed[next(iter(self._closed))]
        self._closed[key] = (
            now_s + hold_s,
            Held(drop_reason, retry_after_s, f"{reason} (held at the ingress)"),
        )
