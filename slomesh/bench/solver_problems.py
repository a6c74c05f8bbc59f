"""Seeded random problems for the QLM global scheduler (`slomesh bench-solver`, the
`qlm-solver` experiment, the solver tests)."""

from __future__ import annotations

import numpy as np

from services.scheduler.core.qlm.solvers.problem import GroupJob, QueueSlot


def random_problem(
    rng: np.random.Generator, groups: int, queues: int, models: int, requests: int | None
) -> tuple[list[GroupJob], list[QueueSlot]]:
    """Heterogeneous queues (speed 0.5-2x, a subset of the models each), groups of random size,
    output length and deadline, at a load where some violations are unavoidable."""
    names = [f"m{i}" for i in range(models)]
    serves = [[m for m in names if rng.random() < 0.75] for _ in range(queues)]
    for m in names:  # every model served somewhere
        if not any(m in s for s in serves):
            serves[int(rng.integers(queues))].append(m)
    qs = []
    for k, s in enumerate(serves):
        active = str(rng.choice(s)) if s else None
        swap = {m: float(rng.uniform(1.0, 8.0)) for m in s}  # warm (host) to cold (disk) tiers
        ready, drain = float(rng.uniform(0.0, 2.0)), float(rng.uniform(0.2, 1.0))
        qs.append(QueueSlot(f"vq{k}", active, ready, drain, swap))
    speed = rng.uniform(0.5, 2.0, size=queues) * 2000.0  # output tokens/s of each instance
    if requests is None:
        sizes = rng.integers(1, 101, size=groups)
    else:
        sizes = rng.multinomial(requests - groups, np.full(groups, 1.0 / groups)) + 1
    gs = []
    for i in range(groups):
        model = str(rng.choice(names))
        tokens = float(sizes[i]) * float(rng.uniform(50.0, 400.0))
        service = {q.name: tokens / speed[k] for k, q in enumerate(qs) if model in serves[k]}
        gs.append(GroupJob(f"g{i}", model, int(sizes[i]), 0.0, service))
    horizon = sum(float(np.mean(list(g.service_s.values()))) for g in gs) / queues
    deadlines = rng.uniform(-0.05, 1.2, size=groups) * horizon
    gs = [
        GroupJob(g.group_id, g.model, g.size, float(d), g.service_s)
        for g, d in zip(gs, deadlines, strict=True)
    ]
    return gs, qs
