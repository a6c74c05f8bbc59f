"""What the scheduler's Status probes change, told: a span (head-sampled with the rest of the
scheduler's root spans) and a warning in the scheduler's log (always: Ray forwards it to the
driver's output), so a run's log counts every replica lost, back, or excused as it swaps."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("slomesh.scheduler")


def health_event(tracer: Any, name: str, replica: str, **attributes: Any) -> None:
    """`name`: replica.health (attributes: healthy) or replica.swap_grace (swap_to)."""
    told = " ".join(f"{k}={v}" for k, v in attributes.items())
    log.warning("%s replica=%s %s", name, replica, told)
    with tracer.start_as_current_span(name) as span:
        span.set_attribute("slomesh.replica", replica)
        for key, value in attributes.items():
            span.set_attribute(f"slomesh.{key}", value)
