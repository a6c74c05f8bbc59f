"""Output-length estimates for QLM from a length predictor (workload profiling, QLM §6).

QLM needs per request a mean and spread of the output length (groups fit μ_o and σ_o from their
members). The predictor's bucket histogram gives both: σ² = Σ p_b·mid_b² − mean². Predictions per
(model, class, max_tokens) are cached and refreshed every `refresh_observations` completions, since
the histogram predictor ignores the prompt and moves slowly.
"""

from __future__ import annotations

import math

from services.predictor.core.base import LengthPredictor
from services.predictor.core.distribution import bucket_midpoints
from services.scheduler.qlm.groups import OutputEstimate
from shared.domain import Request


class LengthEstimator:
    def __init__(self, predictor: LengthPredictor, refresh_observations: int = 50) -> None:
        self.predictor = predictor
        self.refresh_observations = refresh_observations
        self._cache: dict[tuple[str, str, int], tuple[int, OutputEstimate]] = {}

    def estimate(self, request: Request) -> OutputEstimate:
        key = (request.model, request.slo.class_name, request.max_tokens)
        seen = self.predictor.observations
        hit = self._cache.get(key)
        if hit is not None and seen - hit[0] < self.refresh_observations:
            return hit[1]
        dist = self.predictor.predict(request)
        mids = bucket_midpoints(dist.bucket_upper_tokens)
        second = sum(
            p * min(m, request.max_tokens) ** 2
            for p, m in zip(dist.bucket_probs, mids, strict=True)
        )
        std = math.sqrt(max(0.0, second - dist.mean_tokens**2))
        est = OutputEstimate(dist.mean_tokens, std, request.max_tokens)
        self._cache[key] = (seen, est)
        return est

    def observe(self, request: Request, output_tokens: int) -> None:
        self.predictor.observe(request, output_tokens)


class TrueLengths:
    """Clairvoyant estimates (the request's true length, no spread): the oracle-lengths ablation."""

    def estimate(self, request: Request) -> OutputEstimate:
        n = request.output_tokens_to_generate
        return OutputEstimate(float(n), 0.0, request.max_tokens)

    def observe(self, request: Request, output_tokens: int) -> None:
        return None
