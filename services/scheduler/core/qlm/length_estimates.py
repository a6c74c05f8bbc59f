"""Output-length estimates for QLM from a length predictor (workload profiling, QLM §6).

QLM needs per request a mean and spread of the output length (groups fit μ_o and σ_o from their
members). The predictor's bucket histogram gives both: σ² = Σ p_b·mid_b² − mean². Predictions per
(model, class, max_tokens) are cached and refreshed every `refresh_observations` completions, since
the histogram predictor ignores the prompt and moves slowly. A request that carries a length hint
(the prediction the ingress got from the predictor with the prompt) uses that instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from services.scheduler.core.qlm.groups import OutputEstimate
from shared.domain import LengthHint, Request
from shared.domain.length_distribution import bucket_midpoints
from shared.domain.length_prediction import LengthPredictor


def length_std(
    bucket_upper_tokens: Sequence[int], bucket_probs: Sequence[float], mean: float, cap: int
) -> float:
    """Standard deviation of a bucketed distribution: σ² = Σ p_b·min(mid_b, cap)² − mean²."""
    mids = bucket_midpoints(bucket_upper_tokens)
    second = sum(p * min(m, cap) ** 2 for p, m in zip(bucket_probs, mids, strict=True))
    return math.sqrt(max(0.0, second - mean**2))


def hint_from_prediction(
    mean_tokens: float,
    bucket_upper_tokens: Sequence[int],
    bucket_probs: Sequence[float],
    max_tokens: int,
    source: str,
) -> LengthHint | None:
    """A request's LengthHint from a predictor answer; None for an empty answer (no buckets)."""
    if not bucket_upper_tokens or len(bucket_probs) != len(bucket_upper_tokens):
        return None
    mean = min(max(0.0, mean_tokens), float(max_tokens))
    std = length_std(bucket_upper_tokens, bucket_probs, mean, max_tokens)
    return LengthHint(mean, std, source)


def max_tokens_prior(max_tokens: int) -> OutputEstimate:
    """Uniform on [0, max_tokens]: mean max/2, std max/√12. For a request without a length hint
    where no predictor runs in process (the live scheduler; the ingress normally sends a hint)."""
    return OutputEstimate(max_tokens / 2.0, max_tokens / math.sqrt(12.0), max_tokens)


class LengthEstimator:
    def __init__(self, predictor: LengthPredictor | None, refresh_observations: int = 50) -> None:
        """predictor None: requests without a length hint get the max_tokens prior (below)."""
        self.predictor = predictor
        self.refresh_observations = refresh_observations
        self._cache: dict[tuple[str, str, int], tuple[int, OutputEstimate]] = {}

    def estimate(self, request: Request) -> OutputEstimate:
        hint = request.length_hint
        if hint is not None:
            return OutputEstimate(
                min(hint.mean_tokens, request.max_tokens), hint.std_tokens, request.max_tokens
            )
        if self.predictor is None:
            return max_tokens_prior(request.max_tokens)
        key = (request.model, request.slo.class_name, request.max_tokens)
        seen = self.predictor.observations
        hit = self._cache.get(key)
        if hit is not None and seen - hit[0] < self.refresh_observations:
            return hit[1]
        dist = self.predictor.predict(request)
        std = length_std(
            dist.bucket_upper_tokens, dist.bucket_probs, dist.mean_tokens, request.max_tokens
        )
        est = OutputEstimate(dist.mean_tokens, std, request.max_tokens)
        self._cache[key] = (seen, est)
        return est

    def observe(self, request: Request, output_tokens: int) -> None:
        if self.predictor is not None:
            self.predictor.observe(request, output_tokens)


class TrueLengths:
    """Clairvoyant estimates (the request's true length, no spread): the oracle-lengths ablation."""

    def estimate(self, request: Request) -> OutputEstimate:
        n = request.output_tokens_to_generate
        return OutputEstimate(float(n), 0.0, request.max_tokens)

    def observe(self, request: Request, output_tokens: int) -> None:
        return None
