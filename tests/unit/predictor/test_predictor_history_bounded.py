"""The learned predictor's tenant history is bounded: beyond max_tenant_keys the least recently
observed (tenant, model) key is dropped, and a dropped tenant predicts like a new one."""

from __future__ import annotations

import pytest

from services.predictor.core.learned.history import LengthHistory


def test_tenant_keys_are_bounded_least_recently_observed_first() -> None:
    h = LengthHistory(
        global_mean=4.0, half_life_observations=50, prior_strength=5, max_tenant_keys=3
    )
    for t in ("a", "b", "c"):
        h.observe(t, "m", 100)
    h.observe("a", "m", 100)  # a is now the most recent
    h.observe("d", "m", 100)  # drops b, the least recently observed
    assert set(h.tenants) == {("a", "m"), ("c", "m"), ("d", "m")}
    for k in range(10_000):
        h.observe(f"x{k}", "m", 10)
    assert len(h.tenants) == 3
    fresh, forgotten = h.features(["never-seen", "a"], ["m", "m"])
    assert list(forgotten) == pytest.approx(list(fresh))  # a forgotten tenant is a new one
    with pytest.raises(ValueError, match="max_tenant_keys must be >= 1"):
        LengthHistory(4.0, 50, 5, max_tenant_keys=0)
