"""The "online-histogram" length predictor: decayed per-key histograms with a global prior.

Per key (model, SLO class) it keeps, per bucket, an exponentially decayed count and token sum:
each observation first multiplies the key's counts and sums by λ = 2^(−1/half_life) and then adds
1 (and the length) to its bucket, so an observation's weight halves every `half_life_observations`
later observations of the same key and the histogram follows drift. A global histogram over all
keys is kept the same way (its own, longer half-life) on top of the seed prior.

Prediction is a Dirichlet-style posterior mean: key weights = prior_strength · P_global + counts,
where P_global = normalise(seed_strength · P_seed + global counts). A cold key therefore predicts
the global histogram (the seed prior before any observation) and a warm key moves smoothly from it
to its own data. Bucket centres (mean tokens within a bucket) are mixed with the same weights.
The prompt text is not used.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.predictor.core.base import PredictorKind
from services.predictor.core.priors import SeedPrior, SeedPriorName, probs_prior, seed_prior
from shared.domain import Request
from shared.domain.length_distribution import (
    DEFAULT_BUCKET_UPPER_TOKENS,
    LengthDistribution,
    bucket_index,
    bucket_midpoints,
    check_bucket_bounds,
    summarize,
)

STATE_VERSION = 1
"""Version of the state() layout; from_state refuses any other."""


class OnlineHistogramConfig(BaseModel):
    """Knobs of the online-histogram predictor."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    bucket_upper_tokens: tuple[int, ...] = DEFAULT_BUCKET_UPPER_TOKENS
    """Inclusive bucket upper bounds in tokens, strictly ascending (log-spaced by default:
    16, 32, ..., 8192). Longer outputs are counted in the last bucket at its bound."""

    half_life_observations: float = Field(default=200.0, gt=0.0)
    """Per key: after this many later observations of the same key an observation weighs half.
    The effective sample size saturates near 1.44 x this; smaller follows drift faster."""

    global_half_life_observations: float = Field(default=2000.0, gt=0.0)
    """Half-life of the global histogram (all keys together) that cold keys fall back to."""

    prior_strength: float = Field(default=10.0, gt=0.0)
    """Pseudo-observations the global histogram contributes to every key's posterior."""

    seed_prior: SeedPriorName = "azure-conv"
    """Histogram before any observation: "uniform" over buckets, or the output lengths of the
    packaged Azure conversation ("azure-conv") or code ("azure-code") trace."""

    seed_prior_probs: tuple[float, ...] | None = None
    """Explicit seed bucket weights (one per bucket, normalised); overrides seed_prior."""

    seed_strength: float = Field(default=50.0, gt=0.0)
    """Pseudo-observations the seed prior contributes to the global histogram."""

    @field_validator("bucket_upper_tokens")
    @classmethod
    def _check_buckets(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        check_bucket_bounds(v)
        return v

    @model_validator(mode="after")
    def _check_seed_probs(self) -> OnlineHistogramConfig:
        if self.seed_prior_probs is not None:
            probs_prior(self.bucket_upper_tokens, self.seed_prior_probs)
        return self


class _Hist:
    """Decayed per-bucket counts and token sums."""

    __slots__ = ("counts", "observations", "sums")

    def __init__(self, n: int) -> None:
        self.counts: NDArray[np.float64] = np.zeros(n)
        self.sums: NDArray[np.float64] = np.zeros(n)
        self.observations = 0

    def add(self, bucket: int, tokens: float, decay: float) -> None:
        self.counts *= decay
        self.sums *= decay
        self.counts[bucket] += 1.0
        self.sums[bucket] += tokens
        self.observations += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts.tolist(),
            "sums": self.sums.tolist(),
            "observations": self.observations,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], n: int, where: str) -> _Hist:
        h = cls(n)
        counts = np.asarray(d["counts"], dtype=np.float64)
        sums = np.asarray(d["sums"], dtype=np.float64)
        if counts.shape != (n,) or sums.shape != (n,):
            raise ValueError(f"state.{where}: counts and sums need {n} entries (one per bucket)")
        if bool((counts < 0).any()) or bool((sums < 0).any()):
            raise ValueError(f"state.{where}: counts and sums must be >= 0")
        h.counts, h.sums, h.observations = counts, sums, int(d["observations"])
        return h


def _decay(half_life: float) -> float:
    return math.pow(2.0, -1.0 / half_life)


def _mix(
    w_a: NDArray[np.float64],
    c_a: NDArray[np.float64],
    w_b: NDArray[np.float64],
    s_b: NDArray[np.float64],
    fallback: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Weights and centres of pseudo-counts w_a (centres c_a) plus counts w_b (token sums s_b)."""
    w = w_a + w_b
    s = w_a * c_a + s_b
    return w, np.divide(s, w, out=fallback.copy(), where=w > 0)


class OnlineHistogramPredictor:
    """Decayed histogram per (model, SLO class) with a global Bayesian prior (module docstring)."""

    name = "online-histogram"

    def __init__(
        self, config: OnlineHistogramConfig | None = None, seed: SeedPrior | None = None
    ) -> None:
        self.config = config if config is not None else OnlineHistogramConfig()
        upper = self.config.bucket_upper_tokens
        if seed is None:
            if self.config.seed_prior_probs is not None:
                seed = probs_prior(upper, self.config.seed_prior_probs)
            else:
                seed = seed_prior(self.config.seed_prior, upper)
        if seed.probs.shape != (len(upper),):
            raise ValueError(f"seed prior needs {len(upper)} buckets, got {seed.probs.shape[0]}")
        self._seed = seed
        self._mids = bucket_midpoints(upper)
        self._key_decay = _decay(self.config.half_life_observations)
        self._global_decay = _decay(self.config.global_half_life_observations)
        self._global = _Hist(len(upper))
        self._keys: dict[tuple[str, str], _Hist] = {}

    @property
    def observations(self) -> int:
        return self._global.observations

    @property
    def version(self) -> str:
        """Implementation, state layout and how many completions the prediction rests on."""
        return f"{self.name}/v{STATE_VERSION}/obs-{self.observations}"

    def keys(self) -> list[tuple[str, str]]:
        """(model, slo class) pairs with observations of their own."""
        return sorted(self._keys)

    def _global_posterior(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        strength = self.config.seed_strength
        w, c = _mix(
            strength * self._seed.probs,
            self._seed.centres,
            self._global.counts,
            self._global.sums,
            self._mids,
        )
        return w / w.sum(), c

    def predict(self, request: Request, prompt: str | None = None) -> LengthDistribution:
        """Posterior histogram of (request.model, request.slo.class_name), capped by max_tokens."""
        p_global, c_global = self._global_posterior()
        key = self._keys.get((request.model, request.slo.class_name))
        if key is None:
            w, c = p_global, c_global
        else:
            w, c = _mix(
                self.config.prior_strength * p_global, c_global, key.counts, key.sums, self._mids
            )
        return summarize(self.config.bucket_upper_tokens, w, c, request.max_tokens, self.version)

    def observe(self, request: Request, output_tokens: int) -> None:
        """Learn one completion of `output_tokens` tokens (>= 0) for the request's key."""
        if isinstance(output_tokens, bool) or not isinstance(output_tokens, int | np.integer):
            raise ValueError(f"output_tokens must be an int, got {output_tokens!r}")
        if output_tokens < 0:
            raise ValueError(f"output_tokens must be >= 0, got {output_tokens}")
        upper = self.config.bucket_upper_tokens
        b = bucket_index(upper, int(output_tokens))
        tokens = float(min(int(output_tokens), upper[-1]))
        key = (request.model, request.slo.class_name)
        hist = self._keys.get(key)
        if hist is None:
            hist = self._keys[key] = _Hist(len(upper))
        hist.add(b, tokens, self._key_decay)
        self._global.add(b, tokens, self._global_decay)

    def state(self) -> dict[str, Any]:
        """JSON-able snapshot: config, resolved seed prior, global and per-key histograms."""
        return {
            "kind": self.name,
            "state_version": STATE_VERSION,
            "config": self.config.model_dump(mode="json"),
            "seed": {"probs": self._seed.probs.tolist(), "centres": self._seed.centres.tolist()},
            "global": self._global.to_dict(),
            "keys": [
                {"model": m, "slo_class": s, **self._keys[(m, s)].to_dict()}
                for (m, s) in sorted(self._keys)
            ],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> OnlineHistogramPredictor:
        """Rebuild a predictor from state(); refuses another kind or state version."""
        if state.get("kind") != cls.name:
            raise ValueError(f"state.kind must be '{cls.name}', got {state.get('kind')!r}")
        if state.get("state_version") != STATE_VERSION:
            raise ValueError(
                f"state.state_version must be {STATE_VERSION}, got {state.get('state_version')!r}"
            )
        config = OnlineHistogramConfig.model_validate(state["config"])
        n = len(config.bucket_upper_tokens)
        seed = SeedPrior(
            probs=np.asarray(state["seed"]["probs"], dtype=np.float64),
            centres=np.asarray(state["seed"]["centres"], dtype=np.float64),
        )
        predictor = cls(config, seed)
        predictor._global = _Hist.from_dict(state["global"], n, "global")
        for i, entry in enumerate(state["keys"]):
            key = (str(entry["model"]), str(entry["slo_class"]))
            predictor._keys[key] = _Hist.from_dict(entry, n, f"keys[{i}]")
        return predictor

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> OnlineHistogramPredictor:
        """Build from a plain config mapping (None: every default)."""
        return cls(OnlineHistogramConfig.model_validate(dict(config or {})))


ONLINE_HISTOGRAM = PredictorKind(
    name=OnlineHistogramPredictor.name,
    create=OnlineHistogramPredictor.from_config,
    restore=OnlineHistogramPredictor.from_state,
)
