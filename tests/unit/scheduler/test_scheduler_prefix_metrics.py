"""The scheduler's prefix metrics (slomesh_prefix_*), with ray.serve.metrics recorded."""

from __future__ import annotations

from typing import ClassVar

import pytest

from services.scheduler.core.global_policy import RoutingPolicy
from services.scheduler.core.policies import create_global_policy
from services.scheduler.core.routers import ROUTERS
from services.scheduler.prefix_metrics import PrefixMetrics, prefix_index_of
from shared.domain import SLO, Request
from shared.domain.prefix import PromptPrefix


class Recorded:
    registry: ClassVar[dict[str, Recorded]] = {}

    def __init__(self, name, description="", boundaries=None, tag_keys=None) -> None:
        self.name, self.tag_keys = name, tuple(tag_keys or ())
        self.values: dict[tuple, float] = {}
        Recorded.registry[name] = self

    def _key(self, tags):
        assert set(tags or {}) == set(self.tag_keys), (self.name, tags)
        return tuple(sorted((tags or {}).items()))

    def set(self, value, tags=None) -> None:
        self.values[self._key(tags)] = value

    def inc(self, value=1.0, tags=None) -> None:
        assert value > 0, "Ray's Counter.inc refuses values <= 0"
        key = self._key(tags)
        self.values[key] = self.values.get(key, 0.0) + value


@pytest.fixture
def metrics(monkeypatch):
    from ray.serve import metrics as serve_metrics

    Recorded.registry = {}
    for kind in ("Counter", "Gauge", "Histogram"):
        monkeypatch.setattr(serve_metrics, kind, Recorded)
    return Recorded.registry


def req(rid: str, blocks: int) -> Request:
    prefix = PromptPrefix(16, tuple(range(1, blocks + 1)))
    return Request(rid, "m", blocks * 16 + 4, 10, 0.0, SLO(10.0), prefix=prefix)


@pytest.mark.parametrize("policy", ["slomesh", "slomesh-adapters", "prefix-only"])
def test_scheduler_prefix_metrics_hit_rate_tokens_and_pins(metrics, fakes, policy):
    if policy == "slomesh":
        pol = create_global_policy("qlm", {"prefix": {"enabled": True}})
    elif policy == "slomesh-adapters":  # adapter placement wrapped around the prefix affinity
        options = {"prefix": {"enabled": True}, "adapter": {"enabled": True}}
        pol = create_global_policy("qlm", options)
    else:
        pol = RoutingPolicy(ROUTERS.create("prefix-only"))
    insts = [fakes.instance("i0"), fakes.instance("i1")]
    out = PrefixMetrics()
    out.report(pol)  # nothing placed yet: no counter is touched
    assert metrics["slomesh_prefix_tokens_total"].values == {}
    pol.on_arrival(req("a", 100), insts, fakes.rejector(), 0.0)
    pol.on_arrival(req("b", 100), insts, fakes.rejector(), 1.0)
    out.report(pol)
    out.report(pol)  # idempotent: counters count deltas
    tokens = metrics["slomesh_prefix_tokens_total"].values
    assert tokens[(("kind", "prompt"),)] == 2 * (100 * 16 + 4)
    assert tokens[(("kind", "cached"),)] == 100 * 16  # b found a's 100 blocks
    assert metrics["slomesh_prefix_hit_rate"].values[()] == pytest.approx(1600 / 3208)
    pins = metrics["slomesh_prefix_pins_total"].values
    assert pins == ({} if policy == "prefix-only" else {(): 1.0})


def test_scheduler_prefix_metrics_skip_policies_without_an_index(metrics, fakes):
    pol = create_global_policy("qlm", {})
    assert prefix_index_of(pol) is None
    PrefixMetrics().report(pol)
    assert metrics["slomesh_prefix_hit_rate"].values == {}
