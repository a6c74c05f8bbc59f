"""Declarative workload specs (pydantic v2): streams of requests with an SLO class, arrival process
and length source. Invalid values raise `pydantic.ValidationError` naming the field.

A `WorkloadSpec` holds one or more `StreamSpec`s and a total request count; `generate()` in
`shared.workloads.generator` turns it plus a seed into `Request`s.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.workloads.conversations import ConversationSpec
from shared.workloads.slo_classes import get_slo_class

LengthSource = Literal["azure-conv", "azure-code", "fixed", "uniform"]
TraceLengthSource = Literal["azure-conv", "azure-code"]
ArrivalKind = Literal["poisson", "gamma", "trace"]

_CONFIG = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LengthSpec(BaseModel):
    """Where a stream's input and output token counts come from; all counts are clipped to
    [1, max_input_tokens] (input) and [1, max_tokens] (output)."""

    model_config = _CONFIG

    source: LengthSource = Field(
        default="azure-conv",
        description=(
            "azure-conv / azure-code: joint (input, output) rows of that Azure trace, sampled with "
            "replacement (or in order when the stream replays the same trace's arrivals); "
            "fixed: input_tokens and output_tokens for every request; "
            "uniform: inputs uniform in [input_min_tokens, input_max_tokens], outputs from "
            "output_source."
        ),
    )
    input_tokens: int | None = Field(
        default=None, ge=1, description="Prompt tokens of every request (source='fixed' only)."
    )
    output_tokens: int | None = Field(
        default=None, ge=1, description="True output tokens of every request (source='fixed' only)."
    )
    input_min_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Smallest prompt, tokens, inclusive (source='uniform' only).",
    )
    input_max_tokens: int | None = Field(
        default=None, ge=1, description="Largest prompt, tokens, inclusive (source='uniform' only)."
    )
    output_source: TraceLengthSource = Field(
        default="azure-conv",
        description="Trace whose output-token column is sampled for source='uniform'.",
    )
    max_input_tokens: int = Field(
        default=4096, ge=1, description="Cap on prompt tokens (the model's context budget)."
    )
    max_tokens: int = Field(
        default=2048,
        ge=1,
        description="Each request's max_tokens, and the cap on its true output tokens.",
    )

    @model_validator(mode="after")
    def _check_source_fields(self) -> Self:
        if self.source == "fixed":
            for name in ("input_tokens", "output_tokens"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name} is required when source='fixed'")
        if self.source == "uniform":
            lo, hi = self.input_min_tokens, self.input_max_tokens
            if lo is None or hi is None:
                raise ValueError(
                    "input_min_tokens and input_max_tokens are required when source='uniform'"
                )
            if lo > hi:
                raise ValueError(f"input_min_tokens must be <= input_max_tokens, got {lo} > {hi}")
        return self


class StreamSpec(BaseModel):
    """One stream of requests sharing an SLO class, model set, arrival process and lengths."""

    model_config = _CONFIG

    name: str = Field(min_length=1, description="Stream name, unique within a workload.")
    slo_class: str = Field(
        description="SLO class preset name (see shared.workloads.slo_classes.CLASS_PRESETS)."
    )
    ttft_deadline_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "TTFT deadline of this stream's requests, seconds after arrival, in place of the "
            "class's (the requests keep the class's name and its other objectives); None: the "
            "class's deadline."
        ),
    )
    models: list[str] = Field(
        min_length=1, description="Models; each request picks one uniformly at random."
    )
    adapters: list[str] = Field(
        default_factory=list,
        description=(
            "LoRA adapters of the stream's models; each request picks one uniformly at random "
            "(drawn last, so a stream without adapters draws as before). Empty: base models."
        ),
    )
    rate_rps: float = Field(gt=0, description="Mean arrival rate, requests per second.")
    arrival: ArrivalKind = Field(
        default="poisson",
        description="poisson; gamma (gap CV = burstiness_cv); trace (replay `trace` timestamps).",
    )
    burstiness_cv: float = Field(
        default=1.0,
        gt=0,
        description="Coefficient of variation of the gaps between arrivals (arrival='gamma').",
    )
    trace: Literal["conv", "code"] = Field(
        default="conv", description="Azure trace whose timestamps arrival='trace' replays."
    )
    lengths: LengthSpec = Field(
        default_factory=LengthSpec, description="Input/output token-count source."
    )
    tenant: str = Field(default="default", min_length=1, description="Tenant of every request.")
    criticality: int = Field(
        default=0,
        description="Criticality band of every request (higher first; negative: sheddable).",
    )
    conversations: ConversationSpec | None = Field(
        default=None,
        description=(
            "Shared system prompts and multi-turn conversations: the inputs become turns "
            "re-sending their history, with prompt prefixes (shared/workloads/conversations.py); "
            "None: independent prompts without prefixes."
        ),
    )

    @field_validator("slo_class")
    @classmethod
    def _known_class(cls, value: str) -> str:
        get_slo_class(value)
        return value

    @field_validator("models")
    @classmethod
    def _non_empty_models(cls, value: list[str]) -> list[str]:
        for model in value:
            if not model:
                raise ValueError("models entries must be non-empty strings")
        return value


class WorkloadSpec(BaseModel):
    """A workload: streams merged by arrival time, `requests` requests in total."""

    model_config = _CONFIG

    streams: list[StreamSpec] = Field(min_length=1, description="The request streams.")
    requests: int = Field(
        ge=1,
        description="Total requests over all streams, split proportionally to rate_rps.",
    )

    @field_validator("streams")
    @classmethod
    def _unique_names(cls, value: list[StreamSpec]) -> list[StreamSpec]:
        names = [s.name for s in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"stream names must be unique, repeated: {', '.join(dupes)}")
        return value

    @property
    def total_rate_rps(self) -> float:
        """Sum of the streams' rates, requests per second."""
        return float(sum(s.rate_rps for s in self.streams))

    def with_total_rate(self, rate_rps: float) -> WorkloadSpec:
        """A copy with every stream's rate scaled by the same factor so they sum to `rate_rps`."""
        if not (isinstance(rate_rps, int | float) and rate_rps > 0 and rate_rps < float("inf")):
            raise ValueError(f"rate_rps must be > 0 and finite, got {rate_rps}")
        factor = rate_rps / self.total_rate_rps
        streams = [s.model_copy(update={"rate_rps": s.rate_rps * factor}) for s in self.streams]
        return WorkloadSpec(streams=streams, requests=self.requests)
