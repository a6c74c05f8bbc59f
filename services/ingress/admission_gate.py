"""The pipeline's side of the reject gate (core/reject_gate.py): the key of a request, the
429 a held request gets, and the scheduler's verdicts fed back, on the monotonic clock."""

from __future__ import annotations

import time
from typing import Any

from services.ingress.core.errors import overloaded
from services.ingress.core.reject_gate import GateKey, RejectGate
from services.ingress.observer import RequestObserver
from shared.domain import Request


def gate_key(req: Request) -> GateKey:
    return GateKey(req.model, round(req.slo.ttft_deadline_s * 1e3), req.criticality)


class AdmissionGate:
    """Answers requests the scheduler would reject anyway (429 + Retry-After at once)."""

    def __init__(self, hold_off_s: float, observer: RequestObserver) -> None:
        self.gate = RejectGate(hold_off_s)
        self.observer = observer

    @property
    def held(self) -> int:
        return self.gate.held

    def check(self, req: Request) -> None:
        """Raises the 429 APIError when the gate holds `req`'s key."""
        held = self.gate.check(gate_key(req), time.monotonic())
        if held is not None:
            self.observer.rejected(req.slo.class_name, held.reason)
            raise overloaded(held.reason, held.retry_after_s, drop_reason=held.drop_reason)

    def observe(self, req: Request, reply: Any) -> None:
        """The scheduler's AdmitReply for `req`."""
        self.gate.observe(
            gate_key(req),
            bool(reply.admitted),
            str(reply.drop_reason),
            float(reply.retry_after_s),
            str(reply.reason),
            time.monotonic(),
        )
