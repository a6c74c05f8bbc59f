"""Virtual token counter (VTC): token-weighted fairness between tenants.

Paper: Sheng et al., "Fairness in Serving Large Language Models", OSDI '24 (Algorithm 2, VTC, and
§4.4, VTC with length prediction). Each tenant u has a counter c_u of the service it received,
in weighted tokens: h(n_p, n_q) = w_p·n_p + w_q·n_q for n_p input and n_q output tokens, divided
by the tenant's weight (weighted VTC, §4.3). The scheduler serves next the active tenant (one
with queued requests) whose counter is the smallest.

- Dispatch charges input tokens plus the *predicted* output tokens (§4.4): the counter moves
  when the work is committed, not when it is done, so a tenant cannot get ahead while its
  tokens are being generated. The finish corrects the charge to the actual output
  (c_u += w_q·(actual − predicted)/weight); a request that never ran is refunded.
- Counter lift (Algorithm 2, lines 5-10): a tenant that becomes active (its first queued request
  after none) gets c_u = max(c_u, min_{v active} c_v); when no tenant is active, the counter of
  the last tenant that left. So idle time is no credit: a returning tenant cannot monopolise the
  server to catch up, and a new tenant starts level with the others, not at 0.

Properties (paper Theorems 4.4-4.6), checked in tests/unit/scheduler/test_fairness_vtc.py: two
continuously backlogged tenants' counters never differ by more than a bound of about 2·U (U the
largest single charge); a tenant whose demand is below its fair share is served as it comes;
and the server never idles while a request is queued (work conservation is the caller's: it
asks `pick` whenever it has room).

- Forgetting (`forget_idle`): a tenant with nothing queued or running whose last arrival is
  `idle_s` old is dropped (counter, tokens, weight). Were it to come back it is lifted like a
  new tenant, to the smallest active counter, so forgetting costs fairness nothing beyond the
  lift the paper already applies, and the state stays bounded by the tenants of the last
  `idle_s` however many distinct names arrive.

- Shards (`charged`, `absorb`): a scheduler shard publishes `charged`, the weighted tokens it
  charged each tenant (lifts excluded), and adds what its peers charged since their last
  report to its own counters (`absorb`), so each shard picks by the tenant's service across the
  cluster. A tenant this shard keeps no state for is skipped: it is lifted when it arrives.

Pure: no clock, no I/O; the caller says when tenants' queues change and what time it is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class VTCConfig(BaseModel):
    """Virtual token counter knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_token_weight: float = Field(1.0, ge=0)
    """w_p: counter charge per input (prompt) token."""
    output_token_weight: float = Field(1.0, ge=0)
    """w_q: counter charge per output token (the paper's experiments use 2; 1 here so the
    counter is the "tokens served" that Jain's index is measured on)."""
    weights: dict[str, float] = Field(default_factory=dict)
    """Per-tenant weight (share of the band's tokens); tenants not listed use the request's
    tenant_weight (from the API key's config), else 1."""


@dataclass(slots=True)
class _Charge:
    tenant: str
    weight: float
    predicted_output: float


class VirtualTokenCounter:
    """Counters per tenant, the active set, and the per-request charges still open."""

    def __init__(self, config: VTCConfig | None = None) -> None:
        self.cfg = config if config is not None else VTCConfig()
        self.counters: dict[str, float] = {}
        """c_u, weighted tokens (see the module docstring)."""
        self.served_tokens: dict[str, float] = {}
        """Unweighted tokens charged per tenant (input + output, actual once finished)."""
        self.charged: dict[str, float] = {}
        """Weighted tokens this counter charged per tenant itself: counters without lifts and
        without what `absorb` added (what a shard tells its peers)."""
        self._active: dict[str, int] = {}
        """Tenants with queued requests -> how many."""
        self._last_left: float = 0.0
        self._open: dict[str, _Charge] = {}
        self._weights: dict[str, float] = {}
        """The weight each tenant's last request carried."""
        self._open_count: dict[str, int] = {}
        """Tenant -> its dispatched requests not yet finished or refunded."""
        self._last_seen: OrderedDict[str, float] = OrderedDict()
        """Tenant -> its latest arrival time, least recent first (forget_idle)."""

    # ---- bounded state ----------------------------------------------------------------------
    def seen(self, tenant: str, now_s: float) -> None:
        """A request of `tenant` arrived at `now_s`."""
        last = self._last_seen.pop(tenant, now_s)
        self._last_seen[tenant] = max(last, now_s)

    def forget_idle(self, now_s: float, idle_s: float) -> int:
        """Drop the tenants with nothing queued or dispatched whose last arrival is at least
        `idle_s` before `now_s` (module docstring); returns how many. Busy ones are looked at
        again `idle_s` later, so each call costs O(1) amortised."""
        dropped = 0
        while self._last_seen:
            tenant, seen = next(iter(self._last_seen.items()))
            if now_s - seen < idle_s:
                break
            del self._last_seen[tenant]
            if tenant in self._active or self._open_count.get(tenant, 0) > 0:
                self._last_seen[tenant] = now_s
                continue
            for table in (self.counters, self.served_tokens, self._weights, self.charged):
                table.pop(tenant, None)
            dropped += 1
        return dropped

    def absorb(self, tenant: str, weighted_tokens: float) -> None:
        """Add service `tenant` received elsewhere (another shard's charges) to its counter;
        nothing for a tenant without state here (it is lifted when it arrives)."""
        if tenant in self.counters:
            self.counters[tenant] += weighted_tokens

    def _own(self, tenant: str, weighted_tokens: float) -> None:
        self.counters[tenant] = self.counters.get(tenant, 0.0) + weighted_tokens
        self.charged[tenant] = self.charged.get(tenant, 0.0) + weighted_tokens

    @property
    def tenants(self) -> int:
        """Tenants with any state kept."""
        return len(self.counters.keys() | self._last_seen.keys())

    # ---- queue changes --------------------------------------------------------------------
    def enqueued(self, tenant: str) -> None:
        """A request of `tenant` was queued (lifts the counter when the tenant becomes active)."""
        n = self._active.get(tenant, 0)
        if n == 0:
            floor = min((self.counters.get(t, 0.0) for t in self._active), default=self._last_left)
            self.counters[tenant] = max(self.counters.get(tenant, 0.0), floor)
        self._active[tenant] = n + 1

    def dequeued(self, tenant: str) -> None:
        """A request of `tenant` left the queue (dispatched, dropped or aborted)."""
        n = self._active.get(tenant, 0)
        if n <= 1:
            if n == 1:
                self._last_left = self.counters.get(tenant, 0.0)
            self._active.pop(tenant, None)
        else:
            self._active[tenant] = n - 1

    @property
    def active(self) -> list[str]:
        return list(self._active)

    # ---- choice ---------------------------------------------------------------------------
    def pick(self, tenants: Iterable[str]) -> str | None:
        """The tenant among `tenants` with the smallest counter (ties: the first given)."""
        best: str | None = None
        best_c = 0.0
        for t in tenants:
            c = self.counters.get(t, 0.0)
            if best is None or c < best_c:
                best, best_c = t, c
        return best

    def weight_of(self, tenant: str, request_weight: float | None = None) -> float:
        """The configured weight, else the request's (the API key's), else the last one seen."""
        given = request_weight if request_weight is not None else self._weights.get(tenant, 1.0)
        w = self.cfg.weights.get(tenant, given)
        return w if w > 0 else 1.0

    # ---- charges --------------------------------------------------------------------------
    def charge_dispatch(
        self,
        request_id: str,
        tenant: str,
        input_tokens: int,
        predicted_output_tokens: float,
        request_weight: float = 1.0,
    ) -> float:
        """Charge a dispatched request: input + predicted output tokens. Returns the charge."""
        w = self.weight_of(tenant, request_weight)
        self._weights[tenant] = w
        cost = (
            self.cfg.input_token_weight * input_tokens
            + self.cfg.output_token_weight * predicted_output_tokens
        )
        self._own(tenant, cost / w)
        self.served_tokens[tenant] = (
            self.served_tokens.get(tenant, 0.0) + input_tokens + predicted_output_tokens
        )
        self._open[request_id] = _Charge(tenant, w, predicted_output_tokens)
        self._open_count[tenant] = self._open_count.get(tenant, 0) + 1
        return cost / w

    def _close(self, request_id: str) -> _Charge | None:
        ch = self._open.pop(request_id, None)
        if ch is not None:
            n = self._open_count.get(ch.tenant, 0) - 1
            if n > 0:
                self._open_count[ch.tenant] = n
            else:
                self._open_count.pop(ch.tenant, None)
        return ch

    def charge_finish(self, request_id: str, output_tokens: int) -> None:
        """Correct a dispatched request's charge to its actual output tokens."""
        ch = self._close(request_id)
        if ch is None:
            return
        delta = output_tokens - ch.predicted_output
        self._own(ch.tenant, self.cfg.output_token_weight * delta / ch.weight)
        self.served_tokens[ch.tenant] = self.served_tokens.get(ch.tenant, 0.0) + delta

    def refund(self, request_id: str, input_tokens: int) -> None:
        """A dispatched request never ran (rejected by the engine, its replica lost): take its
        whole charge back."""
        ch = self._close(request_id)
        if ch is None:
            return
        cost = (
            self.cfg.input_token_weight * input_tokens
            + self.cfg.output_token_weight * ch.predicted_output
        )
        self._own(ch.tenant, -cost / ch.weight)
        self.served_tokens[ch.tenant] = self.served_tokens.get(ch.tenant, 0.0) - (
            input_tokens + ch.predicted_output
        )
