"""One record per request, as a simulator run or the live mesh observed it."""

from __future__ import annotations

from dataclasses import dataclass

from shared.domain import Request


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one request. Times are absolute seconds on the run's clock.

    first_token_s / finish_s are None when the request was rejected or never finished.
    token_gaps_s holds nothing; TPOT is the mean inter-token time (finish - first) / (n - 1).
    """

    request_id: str
    model: str
    class_name: str
    tenant: str
    instance: str | None
    arrival_s: float
    input_tokens: int
    output_tokens: int
    first_token_s: float | None
    finish_s: float | None
    ttft_deadline_s: float
    tpot_target_s: float | None
    e2e_deadline_s: float | None
    rejected: bool = False
    reject_reason: str = ""
    preemptions: int = 0
    criticality: int = 0
    """The request's band (higher is more critical; negative: sheddable)."""
    rejected_s: float | None = None
    """When a rejected request was answered (None: not rejected, or not recorded)."""

    @classmethod
    def from_request(
        cls,
        r: Request,
        instance: str | None,
        first_token_s: float | None,
        finish_s: float | None,
        output_tokens: int,
        preemptions: int = 0,
        reject_reason: str | None = None,
        rejected_s: float | None = None,
    ) -> RequestRecord:
        """The record of `r` (the simulator and the live ingress both build it this way)."""
        return cls(
            request_id=r.request_id,
            model=r.model,
            class_name=r.slo.class_name,
            tenant=r.tenant,
            instance=instance,
            arrival_s=r.arrival_s,
            input_tokens=r.input_tokens,
            output_tokens=output_tokens,
            first_token_s=first_token_s,
            finish_s=finish_s,
            ttft_deadline_s=r.slo.ttft_deadline_s,
            tpot_target_s=r.slo.tpot_target_s,
            e2e_deadline_s=r.slo.e2e_deadline_s,
            rejected=reject_reason is not None,
            reject_reason=reject_reason or "",
            preemptions=preemptions,
            criticality=r.criticality,
            rejected_s=rejected_s if reject_reason is not None else None,
        )

    @property
    def finished(self) -> bool:
        return self.finish_s is not None and not self.rejected

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float | None:
        return None if self.finish_s is None else self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """Mean inter-token time after the first token; 0 for single-token outputs."""
        if self.first_token_s is None or self.finish_s is None:
            return None
        if self.output_tokens <= 1:
            return 0.0
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def slo_met(self) -> bool:
        """TTFT within its deadline, and TPOT / end-to-end within theirs where set."""
        if not self.finished:
            return False
        ttft, tpot, e2e = self.ttft_s, self.tpot_s, self.e2e_s
        assert ttft is not None and tpot is not None and e2e is not None
        if ttft > self.ttft_deadline_s + 1e-9:
            return False
        if self.tpot_target_s is not None and tpot > self.tpot_target_s + 1e-9:
            return False
        return not (self.e2e_deadline_s is not None and e2e > self.e2e_deadline_s + 1e-9)


@dataclass(frozen=True, slots=True)
class InstanceStats:
    """What one serving instance did over a run.

    busy_s: time spent executing steps or loading models. kv_occupancy_mean: time-weighted mean
    fraction of GPU KV blocks in use over the run. evictions: running requests preempted or
    evicted (recompute or swap). swaps: model loads (tier changes to GPU-active).
    last_finish_s: when its last request finished (None if it finished none).
    """

    instance: str
    gpu: str
    busy_s: float
    kv_occupancy_mean: float
    evictions: int
    swaps: int
    last_finish_s: float | None
    requests_finished: int
    prefix_hit_tokens: int = 0
    """Prompt tokens its prefix cache served (not prefilled)."""
    prefix_prompt_tokens: int = 0
    """Prompt tokens of the requests it looked up in its prefix cache."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """Output of one simulated (or live) run of one stack over one workload."""

    stack: str
    records: list[RequestRecord]
    instances: list[InstanceStats]
    start_s: float
    end_s: float
    wall_s: float
