"""The TTFT guard at the scheduler: reject a request that cannot get its first token in time
before it reaches an engine (SCORPIO's early rejection, moved in front of the replicas).

Each replica reports its engine queue (`UpdateReplica`, or the answer to the scheduler's
`Status` probe): requests running and waiting, and the prompt tokens not yet prefilled. For a
request r on candidate replica i the guard predicts its first token at
    TTFT_i(r) = o_i + T_prefill,i(B_i + A_i + L_r) + s_i(r)
with B_i the reported prefill backlog, A_i the prompt tokens of requests the scheduler placed on i
after that report (the replica had not seen them yet), L_r the request's prompt, T_prefill,i the
replica's measured profile (HardwareProfile.prefill_time_s, one packed prefill of that many
tokens) and o_i the profile's submit overhead. s_i(r) is the seat wait: when the running batch is
full (running >= max_num_seqs), a seat frees up about every E[output]·TPOT / max_num_seqs seconds
and r waits for (waiting + 1) of them. With `deadline_aware`, on an engine whose queue is
earliest-deadline-first (`deadline_ordered`, EDF), B_i, A_i and `waiting` count only what runs
now and the waiting requests due before r (the replica reports each waiting request's deadline
and tokens): a tight request does not wait behind a backlog of looser ones. The request goes to
the candidates whose prediction, plus `margin_s`, is within its TTFT SLO; with none left it is
rejected (429) with the best prediction and the SLO in the reason, and Retry-After = the
predicted excess. The time the request already spent before admission counts towards its TTFT.
A replica without a report
younger than `max_report_age_s`, or without a profile, is not judged (kept as a candidate).
With `bounds_in_flight`, a replica the guard judges is a candidate even past the scheduler's
in-flight limit (`max_in_flight_per_replica`): the predicted TTFT, which counts the seat wait
behind a full batch, bounds its queue instead of a request count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from services.scheduler.core.live_view import LiveReplica
from shared.domain import Request
from shared.domain.engine import EngineStatus


class TTFTAdmissionConfig(BaseModel):
    """The scheduler-side TTFT guard (off unless enabled)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    enabled: bool = False
    """Reject requests whose predicted first token misses their TTFT SLO on every replica."""
    margin_s: float = Field(0.0, ge=0)
    """Seconds by which the predicted first token must beat the TTFT SLO."""
    deadline_aware: bool = False
    """On replicas that report an earliest-deadline-first queue, count only the backlog due
    before the request (off: the whole reported backlog, which also sheds load at overload)."""
    bounds_in_flight: bool = False
    """A replica the guard can judge (a fresh report, a profile of the model) takes requests
    past the scheduler's `max_in_flight_per_replica`: the predicted TTFT bounds its queue, not
    a request count (off: the count limit applies first)."""
    max_report_age_s: float = Field(5.0, gt=0)
    """A replica report older than this is stale: that replica is not judged."""
    mean_output_tokens: float = Field(256.0, gt=0)
    """Output length assumed for running requests when a seat wait is predicted."""
    min_retry_after_s: float = Field(1.0, ge=0)
    """Smallest Retry-After sent with a rejection."""
    max_retry_after_s: float = Field(30.0, gt=0)
    """Largest Retry-After sent with a rejection."""


@dataclass(frozen=True, slots=True)
class QueueReport:
    """What a replica reported of its engine queue, and when (scheduler clock, seconds)."""

    waiting: int
    running: int
    pending_prefill_tokens: int
    reported_s: float
    waiting_prefill: tuple[tuple[float, int], ...] = ()
    """(TTFT deadline, tokens not yet computed) per waiting request; empty: not reported."""
    deadline_ordered: bool = False
    """The engine serves waiting requests earliest TTFT deadline first."""

    @classmethod
    def of(cls, status: EngineStatus, reported_s: float) -> QueueReport:
        """The report of an engine's status taken at `reported_s`."""
        return cls(
            status.waiting,
            status.running,
            status.pending_prefill_tokens,
            reported_s,
            status.waiting_prefill,
            status.deadline_ordered,
        )

    def by_deadline(self) -> bool:
        """The engine is deadline-ordered and reported its waiting requests."""
        return self.deadline_ordered and bool(self.waiting_prefill)

    def ahead_of(self, deadline_s: float, by_deadline: bool) -> tuple[int, int]:
        """(tokens, requests) of the reported backlog a request due at `deadline_s` waits
        behind: all of it, or `by_deadline` on an engine that reported its waiting requests,
        what runs now (running prefill chunks, recomputes) and the waiting requests due first."""
        if not (by_deadline and self.by_deadline()):
            return self.pending_prefill_tokens, self.waiting
        queued = sum(tokens for _, tokens in self.waiting_prefill)
        first = [tokens for due, tokens in self.waiting_prefill if due <= deadline_s]
        return self.pending_prefill_tokens - queued + sum(first), len(first)


@dataclass(frozen=True, slots=True)
class TTFTPrediction:
    replica: str
    ttft_s: float
    backlog_tokens: int


@dataclass(frozen=True, slots=True)
class TTFTVerdict:
    """The candidates that can make the SLO; a rejection reason when none can."""

    candidates: list[LiveReplica]
    reason: str = ""
    retry_after_s: float = 0.0
    best: TTFTPrediction | None = None

    @property
    def rejected(self) -> bool:
        return not self.candidates


class TTFTAdmission:
    def __init__(self, config: TTFTAdmissionConfig | None = None) -> None:
        self.cfg = config if config is not None else TTFTAdmissionConfig()
        self.reports: dict[str, QueueReport] = {}
        self.rejected = 0

    def update(self, application: str, report: QueueReport) -> None:
        """Store replica `application`'s latest report (a newer one replaces it)."""
        old = self.reports.get(application)
        if old is None or report.reported_s >= old.reported_s:
            self.reports[application] = report

    def judges(self, rep: LiveReplica, model: str, now_s: float) -> bool:
        """The guard is on and can judge `rep` for `model`: a fresh report and a profile."""
        report = self.reports.get(rep.application)
        if not self.cfg.enabled or report is None:
            return False
        if now_s - report.reported_s > self.cfg.max_report_age_s:
            return False
        try:
            rep.profile(model)
        except ValueError:
            return False
        return True

    def bounds(self, rep: LiveReplica, model: str, now_s: float) -> bool:
        """`rep` may take `model`'s requests past the in-flight limit (`bounds_in_flight`)."""
        return self.cfg.bounds_in_flight and self.judges(rep, model, now_s)

    def predict(self, rep: LiveReplica, request: Request, now_s: float) -> TTFTPrediction | None:
        """TTFT_i(r) of the module docstring; None when the replica cannot be judged."""
        report = self.reports.get(rep.application)
        if report is None or now_s - report.reported_s > self.cfg.max_report_age_s:
            return None
        try:
            profile = rep.profile(request.model)
        except ValueError:
            return None
        due = request.ttft_deadline_abs_s
        ordered = self.cfg.deadline_aware and report.by_deadline()
        since = sum(
            r.input_tokens
            for rid, r in rep.in_flight.items()
            if rid != request.request_id
            and rep.placed_s.get(rid, -math.inf) > report.reported_s
            and (not ordered or r.ttft_deadline_abs_s <= due)
        )
        ahead, waiting_ahead = report.ahead_of(due, ordered)
        backlog = ahead + since
        ttft = profile.submit_overhead_s + profile.prefill_time_s(1, backlog + request.input_tokens)
        if report.running >= rep.max_num_seqs:
            tpot = profile.decode_time_s(request.input_tokens, rep.max_num_seqs)
            seat_s = self.cfg.mean_output_tokens * tpot / rep.max_num_seqs
            ttft += (waiting_ahead + 1) * seat_s
        return TTFTPrediction(rep.application, ttft, backlog)

    def check(
        self, request: Request, candidates: Sequence[LiveReplica], now_s: float
    ) -> TTFTVerdict:
        """The candidates predicted to make the request's TTFT SLO (all of them when off)."""
        if not self.cfg.enabled:
            return TTFTVerdict(list(candidates))
        slo = request.slo.ttft_deadline_s
        waited = max(0.0, now_s - request.arrival_s)  # spent before admission (ingress, queue)
        budget = slo - self.cfg.margin_s
        keep: list[LiveReplica] = []
        best: TTFTPrediction | None = None
        for rep in candidates:
            pred = self.predict(rep, request, now_s)
            if pred is not None:
                pred = TTFTPrediction(pred.replica, waited + pred.ttft_s, pred.backlog_tokens)
            if pred is None or pred.ttft_s <= budget:
                keep.append(rep)
            if pred is not None and (best is None or pred.ttft_s < best.ttft_s):
                best = pred
        if keep:
            return TTFTVerdict(keep, best=best)
        assert best is not None  # every candidate was judged, and each predicted late
        self.rejected += 1
        excess = best.ttft_s - budget
        retry = min(max(excess, self.cfg.min_retry_after_s), self.cfg.max_retry_after_s)
        margin = f" + margin {self.cfg.margin_s:g} s" if self.cfg.margin_s else ""
        reason = (
            f"deadline-infeasible: predicted TTFT {best.ttft_s:.3f} s on replica "
            f"{best.replica} ({best.backlog_tokens} prompt tokens queued ahead) exceeds the "
            f"'{request.slo.class_name}' TTFT SLO of {slo:g} s{margin}"
        )
        return TTFTVerdict([], reason, retry, best)
