"""The ingress's own admission, in the simulator: the live ingress's two rules in front of the
scheduler, with their own code (services/ingress/core/).

The live mesh runs `num_replicas` ingress replicas; Serve's proxy spreads the requests over
them (dealt in turn here, or as the proxy's router does: `routing`), and each keeps its own
state. On each one, in the order the live
pipeline runs them (services/ingress/pipeline.py):
  1. the reject hold-off (`RejectGate`, core/reject_gate.py): after the scheduler rejected a
     request for a queue-wide reason, requests of the same model, TTFT objective and band are
     answered 429 at once for `reject_hold_off_s` (capped by that Retry-After);
  2. the delivered-latency guard (`DeliveredGuard`, core/delivered.py): a request predicted,
     from the times this replica's own streams delivered, to miss its objective is answered 429.
A request let in becomes a ticket of the guard (`start`); its first token and its end feed it
at the simulated times they happen (`first_tokens` before each arrival, `finished` at the end),
and the scheduler's verdict on it feeds the gate (`heard`).

A batch a batching policy places is served as the live ingress serves it: its slice budget is
declined (services/ingress/core/slice_budget.py), so each member runs whole (the Simulator sets
its applier's `slice_tokens` when it runs an ingress).

Where the live guard reads its clock, two delays of the live mesh are given to it as figures
measured there (the guard's code is the live one; only its inputs are simulated):
  - `hops_s`: live, the guard's ticket starts when the ingress lets the request in, before the
    scheduler call, the replica hop and the first chunk's relay back, so its TTFT samples and
    the waits of requests without a first token span those hops. The simulator's arrival comes
    after them (a calibrated profile's submit overhead), so the ticket starts `hops_s` before it.
  - `loop_lag_s`: how late the ingress's event loop runs (the live `LoopLag`); the guard counts
    it as time every request already spent (`check`'s `loop_lag_s`).

Pure: the simulator passes its clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.ingress.args import IngressArgs
from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig
from services.ingress.core.reject_gate import GateKey, RejectGate
from services.replica.core.sequence import Sequence
from services.scheduler.core.output import Rejection
from shared.domain import Request
from slomesh.sim.leases import SimLeaseConfig


def _live_default(name: str) -> Any:
    return IngressArgs.model_fields[name].default


class SimIngressConfig(BaseModel):
    """The live ingress's admission settings the simulator runs (defaults: the live ingress's,
    services/ingress/args.py)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    num_replicas: int = Field(_live_default("num_replicas"), ge=1)
    """Ingress replicas, each with its own guard and hold-off; requests are dealt in turn."""
    delivered_guard: DeliveredGuardConfig = _live_default("delivered_guard")
    """The delivered-latency guard (`enabled` false: none)."""
    reject_hold_off_s: float = Field(_live_default("reject_hold_off_s"), ge=0)
    """Seconds a queue-wide scheduler rejection holds its key closed (0: no hold-off)."""
    hops_s: float = Field(0.0, ge=0)
    """Seconds between the ingress letting a request in and the simulated arrival (the live
    hops a calibrated profile's submit overhead stands for): its guard ticket starts that much
    before the arrival (module docstring)."""
    loop_lag_s: float = Field(0.0, ge=0)
    """Seconds late the ingress's event loop runs, as measured live: the guard counts it as
    time every request already spent (0: on time)."""
    routing: Literal["round-robin", "fewest-ongoing"] = "round-robin"
    """How arrivals are spread over the ingress replicas: dealt in turn, or as Serve's proxy
    routes them (its power-of-two-choices router: of two replicas drawn at random, all of them
    when there are two, the one with fewer requests in flight, ties at random)."""
    routing_seed: int = Field(0, ge=0)
    """Seed of the draws of the `fewest-ongoing` routing."""
    fast_path: SimLeaseConfig = SimLeaseConfig()
    """The lease fast path of each ingress replica (slomesh/sim/leases.py)."""

    @classmethod
    def of_args(cls, args: Mapping[str, Any]) -> SimIngressConfig:
        """The settings of an ingress application's `args` (as a deploy config gives them)."""
        fields = {k: args[k] for k in cls.model_fields if k in args}
        shards = args.get("scheduler")
        outbox = shards.get("outbox") if isinstance(shards, Mapping) else None
        if outbox is not None:
            fields["fast_path"] = {"outbox": outbox}
        return cls.model_validate(fields)


def gate_key(request: Request) -> GateKey:
    """The live ingress's admission key (services/ingress/admission_gate.py `gate_key`)."""
    return GateKey(request.model, round(request.slo.ttft_deadline_s * 1e3), request.criticality)


class _Replica:
    def __init__(self, cfg: SimIngressConfig, index: int) -> None:
        self.index = index
        self.gate = RejectGate(cfg.reject_hold_off_s)
        self.guard = DeliveredGuard(cfg.delivered_guard) if cfg.delivered_guard.enabled else None
        self.ongoing = 0
        """Requests it let in whose stream has not ended."""


class SimIngress:
    """The ingress replicas' admission (module docstring)."""

    def __init__(self, config: SimIngressConfig) -> None:
        self.cfg = config
        self.replicas = [_Replica(config, k) for k in range(config.num_replicas)]
        self._turn = 0
        self._rng = random.Random(config.routing_seed)
        self._ongoing: dict[str, _Replica] = {}
        """Requests let in and not ended, by the replica that let them in."""
        self._via: dict[str, _Replica] = {}
        """Requests let in whose scheduler verdict the replica that let them in awaits."""
        self._owner: dict[str, _Replica] = {}
        """Guard tickets not yet ended, by the replica whose guard holds them."""
        self._awaiting_first: set[str] = set()
        self.held = 0
        """Requests answered by a hold-off."""
        self.guarded = 0
        """Requests answered by a delivered-latency guard."""

    def admit(self, request: Request, now_s: float) -> str | None:
        """None: `request` goes on to the scheduler (its guard's ticket started); else the
        reason of the 429 the ingress answers at once."""
        rep = self._route()
        held = rep.gate.check(gate_key(request), now_s)
        if held is not None:
            self.held += 1
            return held.reason
        if rep.guard is not None:
            slo = request.slo
            verdict = rep.guard.check(
                request.model,
                slo.ttft_deadline_s,
                slo.tpot_target_s,
                0.0,
                now_s,
                self.cfg.loop_lag_s,
            )
            if not verdict.admit:
                self.guarded += 1
                return verdict.reason
            rep.guard.start(
                request.request_id,
                request.model,
                slo.ttft_deadline_s,
                now_s - self.cfg.hops_s,
                True,
                request.max_tokens,
            )
            self._owner[request.request_id] = rep
            self._awaiting_first.add(request.request_id)
        self._via[request.request_id] = rep
        self._ongoing[request.request_id] = rep
        rep.ongoing += 1
        return None

    def _route(self) -> _Replica:
        """The ingress replica an arrival reaches (`routing`)."""
        if self.cfg.routing == "round-robin":
            rep = self.replicas[self._turn % len(self.replicas)]
            self._turn += 1
            return rep
        drawn = self.replicas if len(self.replicas) <= 2 else self._rng.sample(self.replicas, 2)
        fewest = min(r.ongoing for r in drawn)
        return self._rng.choice([r for r in drawn if r.ongoing == fewest])

    def replica_of(self, request_id: str) -> int:
        """The ingress replica that let `request_id` in (before the scheduler's verdict)."""
        return self._via[request_id].index

    def placed_on_credit(self, request_id: str) -> None:
        """The replica that let `request_id` in placed it on a lease credit: no scheduler
        verdict comes (slomesh/sim/leases.py)."""
        self._via.pop(request_id, None)

    def heard(self, request: Request, rejection: Rejection | None, now_s: float) -> None:
        """The scheduler's verdict on an arrival this ingress let in (None: admitted)."""
        rep = self._via.pop(request.request_id, None)
        if rep is None:
            return
        key = gate_key(request)
        if rejection is None:
            rep.gate.observe(key, True, "", 0.0, "", now_s)
            return
        rep.gate.observe(
            key, False, rejection.drop_reason, rejection.retry_after_s, rejection.reason, now_s
        )
        self.finished(request.request_id, 0, now_s)

    def first_tokens(self, now_s: float, sequence: Callable[[str], Sequence | None]) -> None:
        """Feed the guards every first token streamed by `now_s` (`sequence`: a request's
        engine sequence, None once it is gone)."""
        for rid in list(self._awaiting_first):
            seq = sequence(rid)
            if seq is None or seq.first_token_s is None or seq.first_token_s > now_s:
                continue
            self._awaiting_first.discard(rid)
            guard = self._owner[rid].guard
            if guard is not None:
                guard.first_token(rid, seq.first_token_s)

    def finished(
        self, request_id: str, output_tokens: int, now_s: float, first_s: float | None = None
    ) -> None:
        """`request_id` ended at `now_s` (its first token at `first_s`, if not fed yet)."""
        let_in = self._ongoing.pop(request_id, None)
        if let_in is not None:
            let_in.ongoing -= 1
        rep = self._owner.pop(request_id, None)
        if rep is None or rep.guard is None:
            return
        if request_id in self._awaiting_first:
            self._awaiting_first.discard(request_id)
            if first_s is not None:
                rep.guard.first_token(request_id, first_s)
        rep.guard.end(request_id, output_tokens, now_s)
