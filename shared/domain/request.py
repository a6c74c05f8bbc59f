"""Requests and their service-level objectives. All times are seconds; token counts are ints."""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.domain.prefix import PromptPrefix


@dataclass(frozen=True, slots=True)
class SLO:
    """What a request was promised.

    ttft_deadline_s: time to first token allowed after arrival (the TTFT SLO).
    tpot_target_s: mean time per output token allowed after the first (None: no TPOT SLO).
    e2e_deadline_s: whole-request latency allowed after arrival (None: none).
    class_name: the SLO class this came from ("interactive", "batch-1", ...).
    """

    ttft_deadline_s: float
    tpot_target_s: float | None = None
    e2e_deadline_s: float | None = None
    class_name: str = "default"

    def __post_init__(self) -> None:
        if not self.ttft_deadline_s > 0:
            raise ValueError(f"slo.ttft_deadline_s must be > 0, got {self.ttft_deadline_s}")
        if self.tpot_target_s is not None and not self.tpot_target_s > 0:
            raise ValueError(f"slo.tpot_target_s must be > 0, got {self.tpot_target_s}")
        if self.e2e_deadline_s is not None and not self.e2e_deadline_s > 0:
            raise ValueError(f"slo.e2e_deadline_s must be > 0, got {self.e2e_deadline_s}")


@dataclass(frozen=True, slots=True)
class LengthHint:
    """The length predictor's answer for one request, as the scheduler's policies consume it.

    mean_tokens, std_tokens: predicted mean and standard deviation of the output length (capped by
    max_tokens); source: the predictor version that made it (e.g. "learned:3f2a...+0").
    """

    mean_tokens: float
    std_tokens: float
    source: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mean_tokens) and self.mean_tokens >= 0):
            raise ValueError(
                f"length_hint.mean_tokens must be finite and >= 0, got {self.mean_tokens}"
            )
        if not (math.isfinite(self.std_tokens) and self.std_tokens >= 0):
            raise ValueError(
                f"length_hint.std_tokens must be finite and >= 0, got {self.std_tokens}"
            )


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request as the control plane sees it (metadata only, never prompt text).

    true_output_tokens is ground truth known only to the simulated engine (it plays the model's
    end-of-sequence) and to the `oracle` reference policy; real policies use predictions.
    priority follows vLLM: lower values are served first by the `priority` queue policy.
    length_hint is the output-length prediction made where the prompt was seen (the ingress's
    call to the predictor); policies that estimate lengths use it instead of their own
    prompt-less estimate when present.
    criticality is the request's band in the gateway convention (Gateway API Inference
    Extension's InferenceObjective priority): higher is more critical, 0 standard, negative
    sheddable; bands are served strictly in order and sheddable ones are shed first.
    tenant_weight is the tenant's share in token-weighted fairness (VTC) inside a band.
    """

    request_id: str
    model: str
    input_tokens: int
    max_tokens: int
    arrival_s: float
    slo: SLO
    tenant: str = "default"
    true_output_tokens: int | None = None
    priority: int = 0
    length_hint: LengthHint | None = None
    criticality: int = 0
    tenant_weight: float = 1.0
    prefix: PromptPrefix | None = None
    """Block hashes of the prompt's prefix (shared/domain/prefix.py) for prefix-cache-aware
    placement and the simulated engine's prefix cache; None: unknown (never a cache hit)."""
    adapter: str | None = None
    """The LoRA adapter the request runs with (the client named it as `model`; `model` is then
    its base model), placed where it is loaded (shared/domain/adapter.py); None: the base
    model alone."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.tenant_weight) and self.tenant_weight > 0):
            raise ValueError(f"request.tenant_weight must be > 0, got {self.tenant_weight}")
        if self.input_tokens < 1:
            raise ValueError(f"request.input_tokens must be >= 1, got {self.input_tokens}")
        if self.max_tokens < 1:
            raise ValueError(f"request.max_tokens must be >= 1, got {self.max_tokens}")
        if self.arrival_s < 0:
            raise ValueError(f"request.arrival_s must be >= 0, got {self.arrival_s}")
        if self.true_output_tokens is not None and self.true_output_tokens < 1:
            raise ValueError(
                f"request.true_output_tokens must be >= 1, got {self.true_output_tokens}"
            )

    @property
    def sheddable(self) -> bool:
        """Negative criticality: shed first under saturation."""
        return self.criticality < 0

    @property
    def ttft_deadline_abs_s(self) -> float:
        """Absolute time by which the first token must arrive."""
        return self.arrival_s + self.slo.ttft_deadline_s

    @property
    def output_tokens_to_generate(self) -> int:
        """How many tokens the engine will produce: the true length capped by max_tokens."""
        true = self.true_output_tokens if self.true_output_tokens is not None else self.max_tokens
        return min(true, self.max_tokens)
