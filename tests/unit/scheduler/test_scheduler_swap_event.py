"""A swap order is told on its span and in the scheduler's log, with the view it was sent on."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from services.scheduler.health_events import swap_event
from shared.domain.engine import EngineStatus


class Span:
    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value


def test_swap_event_tells_the_view_on_the_span_and_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    span = Span()
    view = EngineStatus("tiny-llama", 3, 1, 0, 0, 0, 0, 0)
    with caplog.at_level(logging.WARNING, logger="slomesh.scheduler"):
        swap_event(span, "replica-0", "tiny-llama-c", view, ["tiny-llama", "tiny-llama-c"])
    assert span.attributes == {
        "slomesh.model": "tiny-llama-c",
        "slomesh.view.active_model": "tiny-llama",
        "slomesh.view.waiting": 3,
        "slomesh.view.running": 1,
        "slomesh.view.placed_models": ["tiny-llama", "tiny-llama-c"],
    }
    [line] = caplog.messages
    assert line.startswith("lso.swap replica=replica-0 model=tiny-llama-c unix_s=")
    assert line.endswith(
        "view_active=tiny-llama waiting=3 running=1 placed=tiny-llama,tiny-llama-c"
    )
