"""Tenant history: decayed per-(tenant, model) and per-model means of observed log output lengths.

The learned predictor's history features come from here. Per key it keeps an exponentially decayed
count n and sum s of log(output tokens): each observation multiplies both by λ = 2^(−1/half_life)
and adds (1, log length), so n saturates near 1/(1−λ) ≈ 1.44 x half_life and the mean follows drift.
Means are shrunk with `prior_strength` pseudo-observations: the model mean towards the global mean
μ0, the (tenant, model) mean towards the model mean. Features (one row per request):

- hist_mean: shrunk (tenant, model) mean minus μ0 (0 for a cold model and tenant),
- model_conf = n_model / (n_model + k), tenant_conf = n_tenant_model / (n_tenant_model + k).

The shipped model seeds the per-model and per-(tenant, model) keys from its training data (counts
capped at the saturation count), so a fresh predictor already knows the trained models.

Per-(tenant, model) keys are bounded (`max_tenant_keys`, least recently observed dropped first):
a forgotten tenant's requests get its model's mean, as a new tenant's do, so the memory and the
cost of an observation stay flat however many tenant names arrive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

HISTORY_FEATURES = 3
"""Columns of `features`: hist_mean, model_conf, tenant_conf."""
MAX_TENANT_KEYS = 4096
"""Default bound on the (tenant, model) keys kept."""


def shrunk_features(
    n_model: NDArray[np.float64],
    s_model: NDArray[np.float64],
    n_tenant: NDArray[np.float64],
    s_tenant: NDArray[np.float64],
    global_mean: float,
    prior_strength: float,
) -> NDArray[np.float64]:
    """History features (n x 3) from per-row model and (tenant, model) counts and log sums."""
    k = prior_strength
    m_model = (s_model + k * global_mean) / (n_model + k)
    m_tenant = (s_tenant + k * m_model) / (n_tenant + k)
    return np.column_stack(
        [m_tenant - global_mean, n_model / (n_model + k), n_tenant / (n_tenant + k)]
    )


class LengthHistory:
    """Decayed per-model and per-(tenant, model) counts and log-length sums (module docstring)."""

    def __init__(
        self,
        global_mean: float,
        half_life_observations: float,
        prior_strength: float,
        max_tenant_keys: int = MAX_TENANT_KEYS,
    ) -> None:
        if not math.isfinite(global_mean):
            raise ValueError(f"history.global_mean must be finite, got {global_mean}")
        if not half_life_observations > 0:
            raise ValueError("history.half_life_observations must be > 0")
        if not prior_strength > 0:
            raise ValueError("history.prior_strength must be > 0")
        if max_tenant_keys < 1:
            raise ValueError("history.max_tenant_keys must be >= 1")
        self.max_tenant_keys = max_tenant_keys
        self.global_mean = float(global_mean)
        self.half_life_observations = float(half_life_observations)
        self.prior_strength = float(prior_strength)
        self.decay = math.pow(2.0, -1.0 / self.half_life_observations)
        self.models: dict[str, tuple[float, float]] = {}
        self.tenants: dict[tuple[str, str], tuple[float, float]] = {}

    @property
    def saturation(self) -> float:
        """The count a key tends to under steady observation: 1 / (1 − λ)."""
        return 1.0 / (1.0 - self.decay)

    def features(self, tenants: Sequence[str], models: Sequence[str]) -> NDArray[np.float64]:
        """History features (n x 3) of requests from these tenants to these models."""
        n = len(models)
        nm, sm, nt, st = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        for i, (tenant, model) in enumerate(zip(tenants, models, strict=True)):
            nm[i], sm[i] = self.models.get(model, (0.0, 0.0))
            nt[i], st[i] = self.tenants.get((tenant, model), (0.0, 0.0))
        return shrunk_features(nm, sm, nt, st, self.global_mean, self.prior_strength)

    def observe(self, tenant: str, model: str, output_tokens: int) -> None:
        """One completion: decay the request's two keys, then add its log length."""
        y = math.log(max(1, output_tokens))
        n, s = self.models.get(model, (0.0, 0.0))
        self.models[model] = (self.decay * n + 1.0, self.decay * s + y)
        n, s = self.tenants.pop((tenant, model), (0.0, 0.0))
        while len(self.tenants) >= self.max_tenant_keys:  # least recently observed first
            del self.tenants[next(iter(self.tenants))]
        self.tenants[(tenant, model)] = (self.decay * n + 1.0, self.decay * s + y)

    def seed(
        self, tenants: Sequence[str], models: Sequence[str], output_tokens: Sequence[int]
    ) -> None:
        """Set the keys to the totals of these completions (counts capped at saturation)."""
        cap = self.saturation
        acc_m: dict[str, tuple[float, float]] = {}
        acc_t: dict[tuple[str, str], tuple[float, float]] = {}
        for tenant, model, tokens in zip(tenants, models, output_tokens, strict=True):
            y = math.log(max(1, tokens))
            n, s = acc_m.get(model, (0.0, 0.0))
            acc_m[model] = (n + 1.0, s + y)
            n, s = acc_t.get((tenant, model), (0.0, 0.0))
            acc_t[(tenant, model)] = (n + 1.0, s + y)
        self.models = {k: _capped(n, s, cap) for k, (n, s) in acc_m.items()}
        self.tenants = {k: _capped(n, s, cap) for k, (n, s) in acc_t.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (keys sorted)."""
        return {
            "global_mean": self.global_mean,
            "half_life_observations": self.half_life_observations,
            "prior_strength": self.prior_strength,
            "models": [[m, *self.models[m]] for m in sorted(self.models)],
            "tenants": [[t, m, *self.tenants[(t, m)]] for (t, m) in sorted(self.tenants)],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LengthHistory:
        """Inverse of to_dict."""
        h = cls(
            float(d["global_mean"]), float(d["half_life_observations"]), float(d["prior_strength"])
        )
        for i, (m, n, s) in enumerate(d["models"]):
            h.models[str(m)] = _checked(n, s, f"history.models[{i}]")
        for i, (t, m, n, s) in enumerate(d["tenants"]):
            h.tenants[(str(t), str(m))] = _checked(n, s, f"history.tenants[{i}]")
        return h


def _capped(n: float, s: float, cap: float) -> tuple[float, float]:
    return (n, s) if n <= cap else (cap, s * cap / n)


def _checked(n: Any, s: Any, where: str) -> tuple[float, float]:
    nf, sf = float(n), float(s)
    if not (math.isfinite(nf) and nf >= 0 and math.isfinite(sf)):
        raise ValueError(f"{where}: count must be finite and >= 0 and sum finite")
    return nf, sf
