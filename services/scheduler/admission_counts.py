"""The scheduler's admission counters: every admission since the process started, by path.

Spans are sampled (shared/telemetry.py), so what must count every request is kept here: the
admissions placed on lease credits (the fast path: an ingress placed the request itself and
told the scheduler in a `Sync` or `Place`), those admitted by `Admit` (and of them, those that
waited in the global queue first), the refusals, the placements per replica (both paths) and
the `Sync` calls.
`Health` answers the totals; the Serve-handle method `AdmissionCounts` answers all of them
(benchmarks take the difference over a phase: slomesh/bench/compare/admission_counts.py).
Counting is a few integer additions per admission, nothing on a timer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AdmissionCounts:
    fast_path: int = 0
    """Requests placed on lease credits (Sync or Place)."""
    admit: int = 0
    """Requests admitted by `Admit` (a slice resumed counts again)."""
    queued: int = 0
    """Of `admit`, those that waited in the global queue before a replica took them."""
    refused: int = 0
    """`Admit` calls answered with a refusal (a queued request shed or expired included)."""
    by_replica: dict[str, int] = field(default_factory=dict)
    """Placements per replica application, both paths."""
    sync_calls: int = 0
    """`Sync` calls received (each carries an ingress's batch of placements and reports and
    is answered with a grant): with the `Admit` calls (`admit` + `refused`), the calls the
    scheduler paid a round trip for."""

    def placed(self, replica: str, fast_path: bool, queued: bool = False) -> None:
        """One admission on `replica`: on a lease credit (`fast_path`) or by Admit."""
        if fast_path:
            self.fast_path += 1
        else:
            self.admit += 1
            self.queued += queued
        self.by_replica[replica] = self.by_replica.get(replica, 0) + 1

    def refusal(self) -> None:
        self.refused += 1

    def synced(self) -> None:
        """One `Sync` call."""
        self.sync_calls += 1

    @property
    def admitted(self) -> int:
        """Admissions on both paths."""
        return self.fast_path + self.admit

    def snapshot(self) -> dict[str, Any]:
        """The counters as plain data (what `AdmissionCounts` answers)."""
        return {
            "fast_path": self.fast_path,
            "admit": self.admit,
            "queued": self.queued,
            "refused": self.refused,
            "sync_calls": self.sync_calls,
            "by_replica": dict(sorted(self.by_replica.items())),
        }
