"""QLM's Request Waiting Time (RWT) estimator (QLM §6 Eqs. 1-5, Appendix A.1 Eqs. 14-22).

Pure arithmetic: no clock, no RNG, no I/O. All times are seconds relative to "now".

Model (services/scheduler/README.md): a virtual queue serves requests in order at a constant token
throughput Θ (output tokens/s). Request q waits for the output tokens of the requests ahead of
it, W_q = Σ_{i<q} O_i / Θ (Eq. 2); it then completes at C_q = W_q + P + D_q (Eq. 1) with
P the prefill time and D_q = O_q·ε·d the decode time (Eq. 4). A group completes at
C = max_q C_q (Eq. 5). The tokens ahead are unknown; by the CLT their sum over k requests of a
group is N(k·μ_o, k·σ_o²) (Eq. 3). DECISION: the estimate is a quantile of that normal,
mean + z·sqrt(var), z = `z_for_percentile(SLO percentile)`: the margin z·σ·sqrt(k) grows slower
than the mean k·μ, so it is conservative for short queues and relatively tight for long ones.

Mapping onto services/scheduler/core/qlm/solvers/problem.py (`evaluate`):
    GroupJob.service_s[queue] = GroupEstimate.service_s = (n·μ + z·sqrt(n)·σ) / Θ,
    QueueSlot.ready_s / active_model / swap_s = the same-named arguments of `queue_estimates`,
    QueueSlot.drain_s = `drain_s` (the running batch's drain, charged at the head transition).
`evaluate` adds service times (start of the next group = start + service_s) and charges the one
`drain_s` at every transition; `queue_estimates` takes the quantile of the summed tokens of the
whole same-model run and, at a later transition, waits for the previous run's completion, i.e.
its last request's tail P + D (`GroupEstimate.tail_s`). With z = 0 and drain_s equal to that tail
the two give identical start times; with z > 0, sqrt(Σ v) <= Σ sqrt(v) makes `evaluate`'s waits
greater or equal (conservative), never smaller.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from shared.domain.profile import HardwareProfile

DEFAULT_MAX_NUM_SEQS = 256
"""vLLM's default cap on the running batch (shared/domain/engine.py uses the same)."""


def z_for_percentile(p: float) -> float:
    """Standard-normal quantile for a percentile given as a fraction: 0.99 -> 2.326."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"percentile must be a fraction in (0, 1) (p99 is 0.99), got {p}")
    return NormalDist().inv_cdf(p)


def _check(name: str, value: float, *, positive: bool = False) -> None:
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be finite and {bound}, got {value}")


@dataclass(frozen=True, slots=True)
class GroupLoad:
    """A request group's queued requests as the estimator sees them (output-token statistics)."""

    size: int
    """Requests of the group still queued."""
    mu_o: float
    """Mean output tokens per request (fitted per group)."""
    sigma_o: float
    """Standard deviation of output tokens per request."""
    max_o: int
    """Maximum output tokens of a request (the conservative O_q of Eq. 4)."""
    mean_input_tokens: float
    """E[I]: feeds `InstanceRates.from_profile` (P, B, d); the walk itself uses rates per model."""
    model: str

    def __post_init__(self) -> None:
        for name in ("size", "mu_o", "sigma_o", "max_o", "mean_input_tokens"):
            _check(f"GroupLoad.{name}", float(getattr(self, name)))


@dataclass(frozen=True, slots=True)
class InstanceRates:
    """Throughput and latencies of one instance serving one model (QLM §6 offline profiling)."""

    theta_tok_s: float
    """Θ: output tokens per second of the whole instance (Eq. 15)."""
    prefill_s: float
    """P: prefill time of one typical request (Eq. 1)."""
    decode_token_s: float
    """d: time for one request in the running batch to get its next token (Eq. 4)."""
    inefficiency: float = 1.0
    """ε >= 1: continuous-batching preemption slowdown (Eqs. 4 and 15)."""
    batch: int = 1
    """B: the running batch size Θ was derived from (informational)."""

    def __post_init__(self) -> None:
        _check("InstanceRates.theta_tok_s", self.theta_tok_s, positive=True)
        _check("InstanceRates.prefill_s", self.prefill_s)
        _check("InstanceRates.decode_token_s", self.decode_token_s)
        if not 1.0 <= self.inefficiency < math.inf:
            raise ValueError(
                f"InstanceRates.inefficiency must be finite and >= 1, got {self.inefficiency}"
            )

    @classmethod
    def from_profile(
        cls,
        profile: HardwareProfile,
        mean_input_tokens: float,
        mean_output_tokens: float,
        *,
        max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    ) -> InstanceRates:
        """Θ = B / (d·ε) (Eq. 15) with the choices below.

        B (Eq. 16): continuous batching keeps as many requests running as the KV cache holds at
            their mean footprint, floor(kv_capacity_tokens / E[I+O]), capped by the engine's
            `max_num_seqs` and at least 1.
        d: one decode iteration at batch B; a running request is on average halfway through its
            output, so the typical context is E[I] + E[O]/2 (the SCORPIO convention of §1). One
            iteration yields one token per running request, so d is also `decode_token_s`.
        ε: `profile.inefficiency` (measured preemption overhead, 1.0 when unknown).
        P: prefill of one request of E[I] tokens, `profile.prefill_time_s(1, E[I])`.
        Prefill (DECISION, beyond the paper's Θ): in steady state B/E[O] requests join the batch
        per iteration and each adds its marginal prefill p1·E[I] + p2 to that iteration, so
        an iteration takes d + (B/E[O])·(p1·E[I] + p2). With prompts several times longer than
        outputs (the Azure traces) this halves Θ; leaving it out made waits 2.5x too short.
        """
        _check("mean_input_tokens", mean_input_tokens)
        _check("mean_output_tokens", mean_output_tokens)
        per_request = mean_input_tokens + mean_output_tokens
        if per_request <= 0:
            raise ValueError("mean_input_tokens + mean_output_tokens must be > 0")
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        batch = max(1, min(max_num_seqs, math.floor(profile.kv_capacity_tokens / per_request)))
        d = profile.decode_time_s(mean_input_tokens + mean_output_tokens / 2, batch)
        eps = profile.inefficiency
        pre = profile.prefill
        joins = batch / max(mean_output_tokens, 1.0)
        step = d + joins * (pre.p1 * mean_input_tokens + pre.p2)
        return cls(
            theta_tok_s=batch / (step * eps),
            prefill_s=profile.prefill_time_s(1, mean_input_tokens),
            decode_token_s=d,
            inefficiency=eps,
            batch=batch,
        )

    def decode_s(self, output_tokens: float) -> float:
        """D = O·ε·d (Eq. 4)."""
        return output_tokens * self.inefficiency * self.decode_token_s

    def tail_s(self, max_o: int) -> float:
        """P + D with the conservative O = max_o: from a request's start to its completion."""
        return self.prefill_s + self.decode_s(max_o)


@dataclass(frozen=True, slots=True)
class GroupEstimate:
    """One group's place in a virtual queue, as `RWTEstimator.queue_estimates` predicts it."""

    model: str
    size: int
    transition: bool
    """A model transition (drain + swap) precedes this group."""
    start_s: float
    """Wait of the group's first request (Eq. 2 at the decision quantile)."""
    completion_s: float
    """C of the group's last request: its n tokens counted ahead, plus P + D (Eqs. 1, 3-5)."""
    service_s: float
    """Time the group occupies the queue: (n·μ + z·sqrt(n)·σ) / Θ (GroupJob.service_s)."""
    tail_s: float
    """P + D of one member with max_o output tokens (what `evaluate` calls drain_s)."""
    run_start_s: float
    """When the same-model run containing this group started (after any drain + swap)."""
    ahead_mean_tokens: float
    """Mean output tokens of the run ahead of the group's first request."""
    ahead_var_tokens: float
    """Their variance (Σ n_k·σ_k² over earlier groups of the run)."""


@dataclass(frozen=True, slots=True)
class RWTEstimator:
    """Eqs. 1-5 with the decision quantile z (z = 0 estimates the mean)."""

    z: float = 0.0

    def __post_init__(self) -> None:
        # z < 0 would make "more tokens ahead" able to shorten the wait; refuse it.
        _check("RWTEstimator.z", self.z)

    @classmethod
    def for_percentile(cls, p: float) -> RWTEstimator:
        return cls(z_for_percentile(p))

    def tokens_quantile(self, mean: float, var: float) -> float:
        """mean + z·sqrt(var): the z-quantile of N(mean, var) tokens (Eq. 3)."""
        return mean + self.z * math.sqrt(max(var, 0.0))

    def request_wait_s(
        self,
        tokens_ahead_mean: float,
        tokens_ahead_var: float,
        rates: InstanceRates,
        ready_s: float = 0.0,
    ) -> float:
        """W = ready_s + (mean + z·sqrt(var)) / Θ (Eq. 2 with Eq. 3's normal)."""
        return ready_s + self.tokens_quantile(tokens_ahead_mean, tokens_ahead_var) / (
            rates.theta_tok_s
        )

    def service_s(self, group: GroupLoad, rates: InstanceRates) -> float:
        """(n·μ + z·sqrt(n)·σ) / Θ: the group's own tokens at the decision quantile."""
        n = group.size
        return self.tokens_quantile(n * group.mu_o, n * group.sigma_o**2) / rates.theta_tok_s

    def queue_estimates(
        self,
        groups: Sequence[GroupLoad],
        rates_by_model: Mapping[str, InstanceRates],
        ready_s: float,
        swap_s: Mapping[str, float],
        drain_s: float,
        active_model: str | None,
    ) -> list[GroupEstimate]:
        """Walk one virtual queue head-first (QLM Eq. 10 built from Eqs. 2-5).

        Same-model consecutive groups form a run; a group's first request waits for the summed
        tokens of the earlier groups of its run, N(Σ n_k·μ_k, Σ n_k·σ_k²), at the quantile.
        A group whose model differs from the previous one (or from `active_model` for the head)
        starts a new run after a transition: the running batch's `drain_s` for the head (from
        `ready_s`), otherwise the previous run's completion (max C of its groups, Eq. 5), plus
        `swap_s[model]` (0 when absent, as in `evaluate`). A group with size 0 has
        completion_s = start_s.
        """
        _check("drain_s", drain_s)
        if not math.isfinite(ready_s):
            raise ValueError(f"ready_s must be finite, got {ready_s}")
        out: list[GroupEstimate] = []
        model = active_model
        run_start = run_end = ready_s
        mean = var = 0.0
        for g in groups:
            rates = rates_by_model.get(g.model)
            if rates is None:
                raise ValueError(f"no InstanceRates for model '{g.model}' on this queue")
            transition = g.model != model
            if transition:
                prev_end = ready_s + drain_s if not out else run_end
                swap = swap_s.get(g.model, 0.0)
                _check(f"swap_s['{g.model}']", swap)
                run_start = run_end = prev_end + swap
                mean = var = 0.0
                model = g.model
            theta = rates.theta_tok_s
            start = run_start + self.tokens_quantile(mean, var) / theta
            n = g.size
            tail = rates.tail_s(g.max_o)
            mean_after, var_after = mean + n * g.mu_o, var + n * g.sigma_o**2
            if n > 0:
                completion = run_start + self.tokens_quantile(mean_after, var_after) / theta + tail
            else:
                completion = start
            out.append(
                GroupEstimate(
                    model=g.model,
                    size=n,
                    transition=transition,
                    start_s=start,
                    completion_s=completion,
                    service_s=self.service_s(g, rates),
                    tail_s=tail,
                    run_start_s=run_start,
                    ahead_mean_tokens=mean,
                    ahead_var_tokens=var,
                )
            )
            run_end = max(run_end, completion)
            mean, var = mean_after, var_after
        return out

    def request_waits_in_group(
        self,
        group: GroupLoad,
        start_s: float,
        rates: InstanceRates,
        *,
        ahead_mean_tokens: float = 0.0,
        ahead_var_tokens: float = 0.0,
    ) -> list[float]:
        """Estimated wait of each member position q = 1..n (Eq. 2, q−1 members ahead).

        By default the in-group quantile is added to `start_s`: W_q = start_s +
        ((q−1)·μ + z·sqrt(q−1)·σ)/Θ, conservative since quantiles of sums are subadditive.
        Pass the run's tokens already ahead of the group (`GroupEstimate.ahead_*_tokens`) to
        take the quantile of the whole sum instead, which is Eq. 2-3 exactly:
        W_q = run_start + q_z(ahead + (q−1) members) / Θ.
        """
        base = self.tokens_quantile(ahead_mean_tokens, ahead_var_tokens)
        theta = rates.theta_tok_s
        return [
            start_s
            + (
                self.tokens_quantile(
                    ahead_mean_tokens + k * group.mu_o, ahead_var_tokens + k * group.sigma_o**2
                )
                - base
            )
            / theta
            for k in range(group.size)
        ]
