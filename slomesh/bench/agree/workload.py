"""The seeded open-loop workload `bench-agree` replays on the live mesh and in the simulator.

Every request carries everything both sides need to see the same work: an arrival offset (Poisson
arrivals at `rate_rps`), an SLO class, an exact prompt length in tokens and a forced output length
(the live client sends `ignore_eos` with max_tokens = that length). Pure: a seeded
`random.Random`, no I/O; the same (spec, seed) always gives the same requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.domain import SLO, Request


class AgreeClass(BaseModel):
    """One SLO class of the workload, with its share and its request shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    """Class name (also the ingress SLO class the live client asks for)."""
    weight: float = Field(gt=0)
    """Relative share of requests."""
    ttft_s: float = Field(gt=0)
    """TTFT objective, seconds after arrival."""
    output_tokens: int = Field(ge=1)
    """Forced output length of every request of the class, tokens."""
    prompt_tokens_min: int = Field(ge=2)
    """Shortest prompt, tokens (including the tokenizer's BOS)."""
    prompt_tokens_max: int = Field(ge=2)
    """Longest prompt, tokens (uniform between min and max)."""

    @model_validator(mode="after")
    def _ordered(self) -> AgreeClass:
        if self.prompt_tokens_max < self.prompt_tokens_min:
            raise ValueError(
                f"class '{self.name}': prompt_tokens_max ({self.prompt_tokens_max}) must be >= "
                f"prompt_tokens_min ({self.prompt_tokens_min})"
            )
        return self

    def slo(self) -> SLO:
        return SLO(ttft_deadline_s=self.ttft_s, class_name=self.name)


class AgreeWorkloadSpec(BaseModel):
    """The whole workload: classes, arrival rate and request count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    classes: list[AgreeClass] = Field(min_length=1)
    """SLO classes (names unique)."""
    requests: int = Field(ge=1)
    """Requests in the trace."""
    rate_rps: float = Field(gt=0)
    """Poisson arrival rate, requests per second."""

    @model_validator(mode="after")
    def _unique(self) -> AgreeWorkloadSpec:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"classes: names must be unique, got {names}")
        return self


@dataclass(frozen=True, slots=True)
class AgreeRequest:
    """One request of the trace; arrival_s is seconds after the trace starts."""

    request_id: str
    arrival_s: float
    class_name: str
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    prompt_seed: int
    """Seed of this request's prompt text (distinct prompts: no accidental prefix sharing)."""
    model: str | None = None
    """The model the request names (a scenario's trace); None: the mesh's served model."""

    def to_request(self, model: str, arrival_s: float | None = None) -> Request:
        """The domain request (max_tokens = true output length = the forced length); `model`
        where the request names none."""
        return Request(
            request_id=self.request_id,
            model=self.model or model,
            input_tokens=self.prompt_tokens,
            max_tokens=self.output_tokens,
            arrival_s=self.arrival_s if arrival_s is None else arrival_s,
            slo=SLO(ttft_deadline_s=self.ttft_s, class_name=self.class_name),
            true_output_tokens=self.output_tokens,
        )


def generate_agree_workload(spec: AgreeWorkloadSpec, seed: int) -> list[AgreeRequest]:
    """`spec.requests` requests in arrival order, deterministic in (spec, seed)."""
    rng = random.Random(seed)
    weights = [c.weight for c in spec.classes]
    t = 0.0
    out = []
    for i in range(spec.requests):
        if i:
            t += rng.expovariate(spec.rate_rps)
        cls = rng.choices(spec.classes, weights)[0]
        out.append(
            AgreeRequest(
                request_id=f"agree-{seed}-{i:05d}",
                arrival_s=t,
                class_name=cls.name,
                prompt_tokens=rng.randint(cls.prompt_tokens_min, cls.prompt_tokens_max),
                output_tokens=cls.output_tokens,
                ttft_s=cls.ttft_s,
                prompt_seed=rng.getrandbits(32),
            )
        )
    return out


def parse_classes(text: str) -> list[AgreeClass]:
    """`name:weight:ttft_s:output_tokens:prompt_min-prompt_max,...` (the CLI's --classes)."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) != 5:
            raise ValueError(
                f"--classes: '{item}' must be "
                "name:weight:ttft_s:output_tokens:prompt_min-prompt_max"
            )
        name, weight, ttft, out_tokens, prompt = parts
        lo, _, hi = prompt.partition("-")
        try:
            out.append(
                AgreeClass(
                    name=name,
                    weight=float(weight),
                    ttft_s=float(ttft),
                    output_tokens=int(out_tokens),
                    prompt_tokens_min=int(lo),
                    prompt_tokens_max=int(hi or lo),
                )
            )
        except ValueError as err:
            raise ValueError(f"--classes: '{item}': {err}") from None
    if not out:
        raise ValueError("--classes: no class given")
    return out
