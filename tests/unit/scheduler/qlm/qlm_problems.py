"""Seeded global-scheduler problems shared by the QLM solver tests."""

from __future__ import annotations

import numpy as np

from services.scheduler.core.qlm.solvers.problem import GroupJob, QueueSlot


def problem(n: int, seed: int = 0) -> tuple[list[GroupJob], list[QueueSlot]]:
    """Two queues, two models, random deadlines: the heuristic's order is far from optimal."""
    rng = np.random.default_rng(seed)
    queues = [
        QueueSlot("A", "x", 0.0, 0.5, {"x": 2.0, "y": 2.0}),
        QueueSlot("B", "y", 1.0, 0.5, {"x": 1.0, "y": 1.0}),
    ]
    groups = [
        GroupJob(
            f"g{i}",
            "xy"[int(rng.integers(2))],
            int(rng.integers(1, 6)),
            float(rng.uniform(-1, 2 * n)),
            {"A": float(rng.uniform(0.5, 3)), "B": float(rng.uniform(0.5, 3))},
        )
        for i in range(n)
    ]
    return groups, queues
