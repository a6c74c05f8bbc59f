"""Batch placers: which instance runs each formed batch (SCLS §4.5 max-min offloading; baselines).

`loads` maps instance name -> estimated outstanding serving time in seconds (the sum of the
est_time_s of the batches queued on it). A placer adds each assigned batch's est_time_s to its
instance's load in place, so the caller's view stays current; the caller subtracts a batch's
time when it completes (SCLS §4.5, last paragraph). Ties between instances go to the smaller name.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Protocol

from services.scheduler.core.batching.base import FormedBatch


class BatchPlacer(Protocol):
    name: str

    def assign(
        self, batches: list[FormedBatch], loads: dict[str, float]
    ) -> list[tuple[FormedBatch, str]]:
        """(batch, instance) pairs, one per batch; adds each batch's est_time_s to `loads`."""
        ...


def _check_loads(loads: dict[str, float]) -> None:
    if not loads:
        raise ValueError("loads must not be empty: there is no instance to place batches on")


def _least_loaded(loads: dict[str, float]) -> str:
    return min(loads, key=lambda name: (loads[name], name))


class MaxMinOffloader:
    """SCLS max-min: the longest batch goes to the least-loaded instance, repeatedly (Eq. 11).

    Pairs come back in assignment order: est_time_s descending, ties in the given order.
    """

    name = "max-min"

    def assign(
        self, batches: list[FormedBatch], loads: dict[str, float]
    ) -> list[tuple[FormedBatch, str]]:
        _check_loads(loads)
        heap = [(load, name) for name, load in loads.items()]
        heapq.heapify(heap)
        out: list[tuple[FormedBatch, str]] = []
        for batch in sorted(batches, key=lambda b: -b.est_time_s):  # stable: ties keep order
            load, name = heapq.heappop(heap)
            load += batch.est_time_s
            loads[name] = load
            heapq.heappush(heap, (load, name))
            out.append((batch, name))
        return out


class RoundRobinPlacer:
    """Batches in the given order to instances in cyclic sorted-name order (SLS/ILS baselines).

    The position persists across calls: the next batch goes to the first instance whose name
    sorts after the last one used (wrapping), so instances joining or leaving are handled.
    """

    name = "round-robin"

    def __init__(self) -> None:
        self._last: str | None = None

    def assign(
        self, batches: list[FormedBatch], loads: dict[str, float]
    ) -> list[tuple[FormedBatch, str]]:
        _check_loads(loads)
        names = sorted(loads)
        pos = 0 if self._last is None else bisect.bisect_right(names, self._last) % len(names)
        out: list[tuple[FormedBatch, str]] = []
        for batch in batches:
            name = names[pos]
            loads[name] += batch.est_time_s
            out.append((batch, name))
            self._last = name
            pos = (pos + 1) % len(names)
        return out


class LeastLoadedPlacer:
    """Batches in the given order, each to the instance with the least load at that moment."""

    name = "least-loaded"

    def assign(
        self, batches: list[FormedBatch], loads: dict[str, float]
    ) -> list[tuple[FormedBatch, str]]:
        _check_loads(loads)
        out: list[tuple[FormedBatch, str]] = []
        for batch in batches:
            name = _least_loaded(loads)
            loads[name] += batch.est_time_s
            out.append((batch, name))
        return out
