"""The batch-forming global policy: a central pool, batch formers, placers, slices (SCLS §4).

Requests wait in a pool. At each formation the pool (per model) is split into batches by the
configured former (SCLS DP batching, UELLM SLO-ODBS, FIFO) and the batches are placed on the
static-batching instances by the placer (SCLS max-min offloading on estimated load). A batch runs
one slice; its unfinished members come back to the pool with their new context and are batched
again. Formation happens when the adaptive interval T = max(λ·min load, Γ) has passed since the
last one (SCLS §4.4), or at once when an instance has nothing queued (work conservation: this is
event-driven, so an idle instance must not wait for a timer that does not exist).
Instance load = Σ estimated serve time of its unfinished batches (added at placement, removed
when the batch's last member leaves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from services.scheduler.core.batching.base import FormedBatch, PoolItem
from services.scheduler.core.batching.config import BatchingConfig
from services.scheduler.core.batching.estimator import BatchEstimator
from services.scheduler.core.batching.interval import adaptive_interval_s
from services.scheduler.core.batching.registry import BATCH_FORMERS, BATCH_PLACERS
from services.scheduler.core.batching.remaining_lengths import (
    hinted_remaining_tokens,
    remaining_tokens,
)
from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.global_policy import GlobalPolicy
from shared.domain import Request
from shared.domain.engine import SliceEntry
from shared.domain.length_prediction import LengthPredictor


@dataclass(slots=True)
class _Placed:
    instance: str
    est_time_s: float
    members_left: int


class BatchingPolicy(GlobalPolicy):
    def __init__(
        self, config: BatchingConfig | None = None, predictor: LengthPredictor | None = None
    ) -> None:
        """predictor: the length predictor the formers plan with (handed in by the composition
        root; required unless config.lengths is "true")."""
        self.cfg = config if config is not None else BatchingConfig()
        if predictor is None and self.cfg.lengths == "predicted":
            raise ValueError(
                "batching policy: needs a length predictor unless lengths is 'true' or 'hints' "
                "(the composition root hands one in)"
            )
        self.former = BATCH_FORMERS.create(self.cfg.former)(self.cfg)
        self.placer = BATCH_PLACERS.create(self.cfg.placer)
        self.predictor = predictor
        self.pool: dict[str, SliceEntry] = {}
        self.instances: dict[str, InstanceView] = {}
        """Every instance takes pre-formed batches: the simulator's static engines, its
        continuous engines in slice mode, and live replicas (each stream capped at the slice)."""
        self.loads: dict[str, float] = {}
        self._batch_of: dict[str, int] = {}
        self._placed: dict[int, _Placed] = {}
        self._next_batch_id = 0
        self._next_form_s = -math.inf
        self.formations = 0

    # ---- GlobalPolicy hooks
    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        for inst in instances:
            if inst.name not in self.instances:
                self.instances[inst.name] = inst
                self.loads[inst.name] = 0.0
        if not any(i.serves(request.model) for i in self.instances.values()):
            out.reject(
                request,
                f"no instance that takes pre-formed batches serves model '{request.model}' "
                "(batching policies need static-batching engines)",
                now_s,
            )
            return
        self.pool[request.request_id] = SliceEntry(request)
        self._maybe_form(out, now_s)

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        self._maybe_form(out, now_s)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        if self.predictor is not None:
            self.predictor.observe(request, output_tokens)
        self._member_left(request.request_id)

    def on_slice_end(self, entry: SliceEntry, instance: str, out: Decisions, now_s: float) -> None:
        self._member_left(entry.request.request_id)
        self.pool[entry.request.request_id] = entry
        self._maybe_form(out, now_s, force=self.cfg.reform_on_slice_end)

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:
        self.pool.pop(request_id, None)

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        if request_id in self.pool:
            return {"slomesh.batching": "pool", "slomesh.pool_size": len(self.pool)}
        bid = self._batch_of.get(request_id)
        if bid is None:
            return {}
        return {"slomesh.batch": bid, "slomesh.instance": self._placed[bid].instance}

    # ---- formation
    def _maybe_form(self, out: Decisions, now_s: float, force: bool = False) -> None:
        if not self.pool:
            return
        idle = any(load <= 0.0 for load in self.loads.values())
        if now_s < self._next_form_s and not idle and not force:
            return
        by_model: dict[str, list[SliceEntry]] = {}
        for e in self.pool.values():
            by_model.setdefault(e.request.model, []).append(e)
        self.pool.clear()
        for model, entries in by_model.items():
            self._form_model(model, entries, out, now_s)
        self.formations += 1
        self._next_form_s = now_s + adaptive_interval_s(
            self.loads, self.cfg.interval_lambda, self.cfg.min_interval_s
        )

    def _form_model(
        self, model: str, entries: list[SliceEntry], out: Decisions, now_s: float
    ) -> None:
        targets = {n: i for n, i in self.instances.items() if i.serves(model)}
        first = next(iter(targets.values()))
        estimator = BatchEstimator(
            first.profile(model), self.cfg.memory_fraction, self.cfg.max_batch_size
        )
        by_id = {e.request.request_id: e for e in entries}
        items = [self._item(e) for e in entries]
        batches = self.former.form(items, estimator, now_s)
        loads = {n: self.loads[n] for n in targets}
        for batch, name in self.placer.assign(batches, loads):
            self._submit(batch, name, by_id, out)
        self.loads.update(loads)

    def _submit(
        self, batch: FormedBatch, name: str, by_id: dict[str, SliceEntry], out: Decisions
    ) -> None:
        bid = self._next_batch_id
        self._next_batch_id += 1
        self._placed[bid] = _Placed(name, batch.est_time_s, batch.size)
        for item in batch.items:
            self._batch_of[item.request_id] = bid
        entries = [by_id[i.request_id] for i in batch.items]
        out.place_batch(name, entries, batch.iterations)

    def _member_left(self, request_id: str) -> None:
        bid = self._batch_of.pop(request_id, None)
        if bid is None:
            return
        placed = self._placed[bid]
        placed.members_left -= 1
        if placed.members_left <= 0:
            del self._placed[bid]
            self.loads[placed.instance] = max(0.0, self.loads[placed.instance] - placed.est_time_s)
            if not any(p.instance == placed.instance for p in self._placed.values()):
                self.loads[placed.instance] = 0.0  # drop accumulated float error

    def _item(self, e: SliceEntry) -> PoolItem:
        r = e.request
        left = r.max_tokens - e.output_tokens
        if self.cfg.lengths == "true":
            remaining = r.output_tokens_to_generate - e.output_tokens
        elif self.cfg.lengths == "hints":
            remaining = round(hinted_remaining_tokens(r, e.output_tokens))
        else:
            assert self.predictor is not None  # checked in __init__
            dist = self.predictor.predict(r)
            remaining = round(remaining_tokens(dist, e.output_tokens))
        slo = r.slo.e2e_deadline_s or r.slo.ttft_deadline_s
        return PoolItem(
            request_id=r.request_id,
            context_tokens=r.input_tokens + e.output_tokens,
            predicted_output_tokens=max(1, min(left, remaining)),
            slo_s=slo,
            deadline_abs_s=r.arrival_s + slo,
            arrival_s=r.arrival_s,
        )
