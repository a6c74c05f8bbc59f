"""Per-key token-rate limits: a token bucket per tenant (pure; the caller passes the time).

A key with `tokens_per_minute = R` may spend up to R tokens in any minute, in bursts of up to R:
the bucket holds at most R and refills at R/60 tokens a second. A request is charged its prompt
tokens plus its max_tokens when admitted (the most it can cost; unused output is not refunded,
so a limit is never overrun). A request whose charge exceeds what the bucket holds is refused
with the seconds until it would fit (Retry-After); a charge larger than R can never fit and is
refused with the rule. Limits are per ingress replica.

A request the mesh then rejects (429/503 from admission: queue full, deadline infeasible, shed)
gets its charge back (`refund`), so clients retrying through an overload do not burn their
quota on answers they never got. Buckets are kept only while they are not full: a bucket
untouched for a minute has refilled completely, which is the same as having none, so it is
dropped (per-tenant state stays bounded by the tenants active in the last minute).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from services.ingress.core.errors import bad_request, overloaded
from shared.domain import Request


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated_s: float


REFILL_S = 60.0
"""Seconds an empty bucket takes to fill (the allowance is per minute)."""


@dataclass(slots=True)
class TokenRateLimiter:
    _buckets: OrderedDict[str, _Bucket] = field(default_factory=OrderedDict)
    """Tenant -> bucket, least recently touched first."""

    def __len__(self) -> int:
        return len(self._buckets)

    def _bucket(self, tenant: str, per_minute: int, now_s: float) -> _Bucket:
        """`tenant`'s bucket refilled to `now_s` (a new one is full); full buckets untouched
        for REFILL_S are dropped first."""
        while self._buckets:
            name, oldest = next(iter(self._buckets.items()))
            if now_s - oldest.updated_s < REFILL_S:
                break
            del self._buckets[name]
        b = self._buckets.get(tenant)
        if b is None:
            b = self._buckets[tenant] = _Bucket(float(per_minute), now_s)
        else:
            self._buckets.move_to_end(tenant)
        rate = per_minute / REFILL_S
        b.tokens = min(float(per_minute), b.tokens + max(0.0, now_s - b.updated_s) * rate)
        b.updated_s = max(b.updated_s, now_s)
        return b

    def charge(self, tenant: str, tokens: int, per_minute: int, now_s: float) -> float:
        """Spend `tokens` of `tenant`'s bucket; 0.0 when allowed, else the seconds to wait.

        Raises ValueError when `tokens` exceeds the whole per-minute allowance."""
        if tokens > per_minute:
            raise ValueError(
                f"request needs {tokens} tokens (prompt + max_tokens) but the key allows "
                f"{per_minute} tokens per minute"
            )
        rate = per_minute / REFILL_S
        b = self._bucket(tenant, per_minute, now_s)
        if b.tokens >= tokens:
            b.tokens -= tokens
            return 0.0
        return (tokens - b.tokens) / rate

    def admit(self, per_minute: int | None, request: Request, now_s: float) -> None:
        """Charge `request` (prompt + max_tokens) to its tenant's limit: APIError 429 +
        Retry-After (drop reason "rate-limited") when it must wait, 400 when it can never fit;
        nothing when the tenant has no limit."""
        if per_minute is None:
            return
        tenant, tokens = request.tenant, request.input_tokens + request.max_tokens
        try:
            wait_s = self.charge(tenant, tokens, per_minute, now_s)
        except ValueError as err:
            raise bad_request("max_tokens", str(err), "rate_limit_exceeded") from None
        if wait_s > 0:
            raise overloaded(
                f"rate limit: tenant '{tenant}' may use {per_minute} tokens per minute",
                wait_s,
                drop_reason="rate-limited",
            )

    def refund(self, per_minute: int | None, request: Request, now_s: float) -> None:
        """Give back what `admit` charged `request` (the mesh rejected it: 429/503), up to the
        bucket's size; nothing when the tenant has no limit."""
        if per_minute is None:
            return
        tokens = request.input_tokens + request.max_tokens
        if tokens > per_minute:
            return  # never charged: admit refused it with a 400
        b = self._bucket(request.tenant, per_minute, now_s)
        b.tokens = min(float(per_minute), b.tokens + tokens)
