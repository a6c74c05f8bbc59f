"""SLO-ODBS with its magic threshold replaced by limits derived from the estimators.

UELLM's Algorithm 1 walks requests in SLO order and closes a batch when
w1·T_l + w2·T_o exceeds a hand-tuned constant (15000 in the reference code). Each of the three
things that constant stands in for can be computed directly from the hardware profile:

(a) memory - T_o and the batch cap exist to keep a padded batch inside the KV cache. Here a
    request joins only if estimator.fits(n+1, padded context, iterations) holds, with the
    batch padded to its longest context and decoded for its longest predicted output (or the
    slice). This is exact for the target instance type, where the constant is per-setup.
(b) time - T_l exists so that SLO-tight requests are not held back by a large batch. Here the
    batch's estimated serve time with the request, estimator.serve_time_s(n+1, padded,
    iterations), must not exceed the smallest remaining slack (deadline_abs_s − now_s) among
    the members and the request, i.e. growing the batch may not make any member late that would
    otherwise be on time (in seconds, not in a unitless score that mixes SLOs and tokens).
    Members already lost (slack below their own serve time alone) do not constrain the batch:
    under overload they would otherwise shrink every batch to one request and collapse
    throughput, making everyone late.
(c) padding waste - T_o's |q.len − O_CM| penalises mixing short and long outputs, whose short
    members idle through the long member's decode. Here that waste is measured directly:
    1 − Σ min(pred_i, iters) / ((n+1)·iters) is the fraction of the batch's decode slots spent
    on members that have already finished; it must stay <= max_padding_waste. With no slice,
    iters is the longest prediction, so this is 1 − Σ pred_i / ((n+1)·max pred).

Two switches for overload (the UELLM Fig. 4 comparison on uellm-paper): lost_last
walks the requests that can still finish in time alone first and the lost ones after them (a
lost request at the head of the SLO order otherwise opens a batch that savable ones then wait
behind), and slack_limit=False drops rule (b), leaving memory and padding waste as the bounds.

The first request of a batch always opens it (alone it is still served, even if it is already
late or exceeds the memory estimate), so every pool item lands in exactly one batch.
"""

from __future__ import annotations

from services.scheduler.core.batching.base import FormedBatch, PoolItem, make_batch
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.slo_odbs import check_slice_iterations, slo_order


class DerivedODBSFormer:
    """SLO-ordered greedy batching bounded by memory, deadline slack and padding waste."""

    def __init__(
        self,
        max_padding_waste: float = 0.5,
        slice_iterations: int | None = None,
        lost_last: bool = False,
        slack_limit: bool = True,
    ) -> None:
        if not 0.0 <= max_padding_waste <= 1.0:
            raise ValueError(f"max_padding_waste must be in [0, 1], got {max_padding_waste}")
        check_slice_iterations(slice_iterations)
        self.max_padding_waste = max_padding_waste
        self.slice_iterations = slice_iterations
        self.lost_last = lost_last
        self.slack_limit = slack_limit
        self.name = "slo-odbs-derived"

    def padding_waste(self, items: list[PoolItem]) -> float:
        """Fraction of the decode slots of `items` spent on members that have finished."""
        iters = self._iterations(items)
        used = sum(min(i.predicted_output_tokens, iters) for i in items)
        return 1.0 - used / (len(items) * iters)

    def admits(
        self, batch: list[PoolItem], q: PoolItem, estimator: BatchEstimator, now_s: float
    ) -> bool:
        """Whether `q` may join the non-empty `batch` under rules (a), (b) and (c)."""
        grown = [*batch, q]
        n = len(grown)
        padded = max(i.context_tokens for i in grown)
        iters = self._iterations(grown)
        if not estimator.fits(n, padded, iters):
            return False
        live = [i for i in grown if self._savable(i, estimator, now_s)] if self.slack_limit else []
        if live:
            slack = min(i.deadline_abs_s for i in live) - now_s
            if estimator.serve_time_s(n, padded, iters) > slack:
                return False
        return self.padding_waste(grown) <= self.max_padding_waste

    def form(
        self, pool: list[PoolItem], estimator: BatchEstimator, now_s: float
    ) -> list[FormedBatch]:
        groups: list[list[PoolItem]] = []
        current: list[PoolItem] = []
        if self.lost_last:  # savable first (SLO order), then the lost ones (SLO order)
            lost = {q.request_id for q in pool if not self._savable(q, estimator, now_s)}
            order = sorted(pool, key=lambda q: (q.request_id in lost, *slo_order(q)))
        else:
            order = sorted(pool, key=slo_order)
        for q in order:
            if not current or self.admits(current, q, estimator, now_s):
                current.append(q)
            else:
                groups.append(current)
                current = [q]
        if current:
            groups.append(current)
        return [make_batch(g, estimator, self.slice_iterations) for g in groups]

    def _savable(self, item: PoolItem, estimator: BatchEstimator, now_s: float) -> bool:
        """Whether `item` alone could still finish before its deadline."""
        alone = estimator.serve_time_s(1, item.context_tokens, self._iterations([item]))
        return item.deadline_abs_s - now_s >= alone

    def _iterations(self, items: list[PoolItem]) -> int:
        return self.slice_iterations or max(i.predicted_output_tokens for i in items)
