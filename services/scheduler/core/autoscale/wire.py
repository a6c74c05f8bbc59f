"""A `ModelLoad` as flat numeric metrics, and back (Serve's custom autoscaling metrics carry
`dict[str, float]` only: the scheduler publishes one, the Serve policy rebuilds the load).

The queue travels as `QUEUE_BUCKETS` equal-count buckets of slack (sorted), each as its smallest
slack and its size; decoding gives every request of a bucket that smallest slack, so the
predicted attainment can only be lower than the scheduler's own (never optimistic).
Replica counts are not encoded: the Serve policy knows them (running and target replicas).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from services.scheduler.core.autoscale.signal import ModelLoad, QueuedWork

QUEUE_BUCKETS = 16
PREFIX = "slomesh_"
_SCALARS = (
    "ongoing_requests",
    "arrival_rate_rps",
    "arrival_trend_rps_s",
    "mean_output_tokens",
    "replica_tokens_s",
    "prefill_s",
    "replica_startup_s",
)


def encode(load: ModelLoad) -> dict[str, float]:
    out = {PREFIX + name: float(getattr(load, name)) for name in _SCALARS}
    out[PREFIX + "output_tokens_var"] = load.queue[0].output_tokens_var if load.queue else 0.0
    n = len(load.queue)
    for b in range(QUEUE_BUCKETS):
        lo, hi = b * n // QUEUE_BUCKETS, (b + 1) * n // QUEUE_BUCKETS
        out[f"{PREFIX}q{b}_n"] = float(hi - lo)
        out[f"{PREFIX}q{b}_slack_s"] = load.queue[lo].slack_s if hi > lo else 0.0
    return out


def decode(
    metrics: Mapping[str, float], model: str, now_s: float, ready: int, starting: int
) -> ModelLoad | None:
    """The load `metrics` describe, or None when a scalar is missing (no signal yet)."""
    try:
        scalars = {name: float(metrics[PREFIX + name]) for name in _SCALARS}
    except KeyError:
        return None
    if not all(math.isfinite(v) for v in scalars.values()):
        return None
    mean = scalars["mean_output_tokens"]
    var = float(metrics.get(PREFIX + "output_tokens_var", 0.0))
    queue: list[QueuedWork] = []
    for b in range(QUEUE_BUCKETS):
        count = int(metrics.get(f"{PREFIX}q{b}_n", 0.0))
        slack = float(metrics.get(f"{PREFIX}q{b}_slack_s", 0.0))
        queue.extend(QueuedWork(slack, mean, var) for _ in range(count))
    return ModelLoad(
        model=model,
        now_s=now_s,
        ready_replicas=ready,
        starting_replicas=starting,
        queue=tuple(queue),
        **scalars,
    )
