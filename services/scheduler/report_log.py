"""The scheduler's log of the completion reports it took and the admissions it checked
(`report_log_file`, JSON lines).

One line per report: the request, its replica, when the ingress saw its stream end
(`finish_s`, the report's `finish_unix_s`) and when the report reached these books
(`reported_s`), both on the host's wall clock. Between the two the request still counts as in
flight on its replica: the ingress batches its reports (services/ingress/shard_outbox.py) and
the scheduler's loop may be busy.

One line per admission checked (`Admit`, not a slice's return): the request, when the ingress
let it in (`arrival_s`, the request's arrival) and when the scheduler checked it (`admitted_s`).
Between the two the ingress asked the length predictor and sent `Admit`, and the scheduler's
loop may be busy; the TTFT guard counts that time as spent (core/ttft_admission.py).

`slomesh bench-agree` reads the log to give the simulated scheduler the same delays
(slomesh/bench/agree/report_delay.py, slomesh/bench/agree/admission_hop.py). Lines are
buffered and appended by `flush`, once per Report or Sync call, off the policy's path.
"""

from __future__ import annotations

import json

from shared.domain import Request
from shared.rpc.slomesh.v1 import scheduler_pb2


class ReportLog:
    """Reports taken and admissions checked, buffered until `flush` appends them to `path`
    (None: no log)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lines: list[str] = []

    def add(self, report: scheduler_pb2.CompletionReport, now_s: float) -> None:
        """`report` reached the books at `now_s` (wall clock, s)."""
        if self.path is None:
            return
        line = {
            "request_id": report.meta.request_id,
            "replica": report.replica.application,
            "finish_s": report.finish_unix_s,
            "reported_s": now_s,
            "reason": report.finish_reason,
        }
        self._lines.append(json.dumps(line) + "\n")

    def admitted(self, request: Request, now_s: float) -> None:
        """`request` was checked for admission at `now_s` (wall clock, s)."""
        if self.path is None:
            return
        line = {"request_id": request.request_id, "arrival_s": request.arrival_s}
        self._lines.append(json.dumps(line | {"admitted_s": now_s}) + "\n")

    def flush(self) -> None:
        """Append the buffered lines to the log."""
        if self.path is None or not self._lines:
            return
        lines, self._lines = self._lines, []
        with open(self.path, "a") as f:
            f.writelines(lines)
