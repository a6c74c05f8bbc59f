"""What the scheduler's Status probes change, told: a span (head-sampled with the rest of the
scheduler's root spans) and a warning in the scheduler's log (always: Ray forwards it to the
driver's output), so a run's log counts every replica lost, back, or excused as it swaps. Each
swap order sent is told in the same log, with its wall-clock time and the scheduler's view of
the replica then, so a run's swaps can be set against the replicas' own swap logs."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from shared.domain.engine import EngineStatus

log = logging.getLogger("slomesh.scheduler")


def health_event(tracer: Any, name: str, replica: str, **attributes: Any) -> None:
    """`name`: replica.health (attributes: healthy) or replica.swap_grace (swap_to)."""
    told = " ".join(f"{k}={v}" for k, v in attributes.items())
    log.warning("%s replica=%s %s", name, replica, told)
    with tracer.start_as_current_span(name) as span:
        span.set_attribute("slomesh.replica", replica)
        for key, value in attributes.items():
            span.set_attribute(f"slomesh.{key}", value)


def swap_event(
    span: Any, replica: str, model: str, view: EngineStatus, placed: Sequence[str]
) -> None:
    """A swap order sent to `replica`, on its span and in the log with the wall-clock time:
    the scheduler's view of the replica then (active model, waiting, running, the models of the
    requests placed there, in placement order)."""
    span.set_attribute("slomesh.model", model)
    span.set_attribute("slomesh.view.active_model", view.active_model or "")
    span.set_attribute("slomesh.view.waiting", view.waiting)
    span.set_attribute("slomesh.view.running", view.running)
    span.set_attribute("slomesh.view.placed_models", list(placed))
    log.warning(
        "lso.swap replica=%s model=%s unix_s=%.3f view_active=%s waiting=%d running=%d placed=%s",
        replica,
        model,
        time.time(),
        view.active_model,
        view.waiting,
        view.running,
        ",".join(placed),
    )
