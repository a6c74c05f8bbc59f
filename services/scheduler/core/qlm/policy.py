"""The `qlm` global policy (QLM, SoCC'24): request groups in virtual queues, pulled by instances.

Arrivals join a request group (services/scheduler/core/qlm/groups.py), new groups are inserted
into a virtual queue at their deadline position, and the RWT estimator (rwt.py) predicts every
group's wait. Only when a violation is predicted does the global scheduler (solvers/) re-plan
the assignment and order of all groups - at most once per `replan_min_interval_s`. Instances pull
from the head of their own queue when their engine has room (lso.py holds the pull, eviction and
swap rules). The same object runs in the simulator and in the live scheduler deployment.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.fairness.selector import GroupSelector
from services.scheduler.core.global_policy import GlobalPolicy
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.estimates import QueueEstimator
from services.scheduler.core.qlm.groups import Grouper, RequestGroup
from services.scheduler.core.qlm.length_estimates import LengthEstimator, TrueLengths
from services.scheduler.core.qlm.rwt_accuracy import RWTAccuracy
from services.scheduler.core.qlm.rwt_error import RWTErrorTracker
from services.scheduler.core.qlm.serving_operations import Placed, ServingOps
from services.scheduler.core.qlm.shedding import Shedding
from services.scheduler.core.qlm.solvers.global_scheduler import GlobalScheduler
from services.scheduler.core.qlm.swap_plan import SwapPlan
from services.scheduler.core.qlm.tight_classes import choose_direct, direct_candidates, is_tight
from services.scheduler.core.qlm.virtual_queues import VirtualQueues
from shared.domain import Request
from shared.domain.length_prediction import LengthPredictor


@dataclass
class QLMStats:
    """Counters the bench and the live scheduler report."""

    replans: int = 0
    solver_s: float = 0.0
    reordered_groups: int = 0
    predicted_violations: int = 0
    rejected_infeasible: int = 0
    rebalances: int = 0
    reclusters: int = 0
    instances_lost: int = 0


class QLMPolicy(GlobalPolicy):
    supports_leases = True

    def __init__(
        self,
        config: QLMConfig | None = None,
        timer: Callable[[], float] = time.perf_counter,
        predictor: LengthPredictor | None = None,
    ) -> None:
        """predictor: the length predictor behind QLM's estimates (the composition root hands one
        in; None on the live mesh, where every request carries the ingress's length hint and
        requests without one fall back on a prior over max_tokens: length_estimates.py)."""
        self.cfg = config if config is not None else QLMConfig()
        self.grouper = Grouper(self.cfg.grouping)
        self.vqs = VirtualQueues()
        self.scheduler = GlobalScheduler(self.cfg.solver, timer=timer)
        self.lengths: LengthEstimator | TrueLengths = (
            TrueLengths() if self.cfg.lengths == "true" else LengthEstimator(predictor)
        )
        self.accuracy = RWTAccuracy()
        """Point (mean) wait predictions vs measured waits: the estimator's R² (Fig. 18)."""
        self.accuracy_quantile = RWTAccuracy()
        """The SLO-quantile predictions the scheduler acts on, scored the same way."""
        self.rwt_error = RWTErrorTracker(self.cfg.rwt_error)
        """Recent error of the point predictions; the widened quantile (rwt_error.py)."""
        self.instances: dict[str, InstanceView] = {}
        self.estimator = QueueEstimator(self.cfg, self.grouper, self.vqs, self.instances)
        self.selector = GroupSelector(self.cfg.tenancy)
        """Bands, tenant fairness (VTC counters) and what the counters were charged."""
        swaps = SwapPlan(self.cfg.swap_plan, self.estimator.swap_lead_s, self.instances)
        self.ops = ServingOps(self.cfg, self.grouper, self.vqs, self.selector, swaps)
        self.shedding = Shedding(
            self.cfg.tenancy, self.grouper, self.estimator, self.instances, self._drop_queued
        )
        self.stats = QLMStats()
        self._pinned: dict[str, str] = {}
        self._rr = 0
        self._last_check_s = -math.inf
        self._last_plan_s = -math.inf
        self._accepted_late: set[str] = set()
        self._snapshot_taken = False
        self._models_seen: set[str] = set()

    # ---- GlobalPolicy hooks ---------------------------------------------------------------------
    def on_arrival(
        self,
        request: Request,
        instances: Sequence[InstanceView],
        out: Decisions,
        now_s: float,
    ) -> None:
        self._sync(instances)
        if not any(i.serves(request.model) for i in self.instances.values()):
            out.reject(request, f"no instance serves model '{request.model}'", now_s)
            return
        if self.shedding.reject_at_arrival(request, out, now_s):
            return
        est = self.lengths.estimate(request)
        self.estimator.observe_arrival(request, est.mean_tokens)
        self._models_seen.add(request.model)  # tight.single_model_only
        self.ops.swap_plan.observe(request)
        tight = self.cfg.tight
        contended = self.selector.contended(request)  # tenants or bands to choose between
        direct = (
            choose_direct(
                request, self._direct_candidates(request, instances), tight.active_model_only
            )
            if is_tight(tight, request)
            and (not contended or (tight.direct_while_queue_empty and not self._queued()))
            else None
        )
        if direct is not None:  # a tight class skips the virtual queues (tight_classes.py)
            self.ops.place(direct, request, est, out, now_s)
            return
        group = self.grouper.assign(request, est, now_s)
        self.selector.queued(request)
        self._place_new_groups(out, now_s)
        wait = self._predicted_wait(request, group, now_s)
        if wait is not None and wait > request.slo.ttft_deadline_s and not request.sheddable:
            self.shedding.shed_queued(out, now_s)
        if (
            wait is not None
            and wait > request.slo.ttft_deadline_s
            and group.group_id not in self._accepted_late
        ):
            self.stats.predicted_violations += 1
            if self._replan(out, now_s):
                wait = self._predicted_wait(request, group, now_s)
        factor = self.cfg.reject_over_slo_factor
        if factor is not None and wait is not None and wait > factor * request.slo.ttft_deadline_s:
            self._drop_queued(request.request_id)
            self.stats.rejected_infeasible += 1
            out.reject(
                request,
                f"predicted TTFT {wait:.1f}s exceeds {factor:g}x the '{request.slo.class_name}' "
                f"SLO of {request.slo.ttft_deadline_s:g}s (qlm: capacity short, scale up)",
                now_s,
            )
            return
        if wait is not None:
            q = self.vqs.queue_of(group.group_id)
            assert q is not None
            point = self.estimator.request_wait_s(q, group, request.request_id, now_s, point=True)
            ahead = self._groups_ahead(group)
            self.accuracy.predict(request.request_id, point, len(self.grouper), ahead)
            self.accuracy_quantile.predict(request.request_id, wait, len(self.grouper), ahead)
            model_q = self.estimator.request_wait_s(q, group, request.request_id, now_s)
            self.rwt_error.predict(request.request_id, point, model_q, ahead)  # logs the widened
        if not self.cfg.lso.pull:
            self._push(request, out, now_s)
        for inst in self.instances.values():
            self._pull(inst, out, now_s)
        if not request.sheddable and self.grouper.group_of(request.request_id) is not None:
            self.shedding.shed_queued(out, now_s)  # saturated: more critical work waits

    def on_placed(
        self, request: Request, instance: InstanceView, out: Decisions, now_s: float
    ) -> None:
        """Placed by an ingress's lease (core/leases.py) while no group waited: served as a
        direct dispatch (tight_classes.py), so eviction, fairness and finish see it."""
        self._sync([instance])
        est = self.lengths.estimate(request)
        self.estimator.observe_arrival(request, est.mean_tokens)
        self.ops.place(instance, request, est, out, now_s, leased=True)

    def on_step_end(self, instance: InstanceView, out: Decisions, now_s: float) -> None:
        self._sync([instance])  # its work may all have been placed by a wrapper (pinning)
        snap = self.cfg.rwt_snapshot_s
        if snap is not None and now_s >= snap and not self._snapshot_taken:
            self._snapshot_taken = True
            self.snapshot_predictions(now_s)
        if self.selector.is_contended:  # answer, not serve, what can no longer start in time
            self.shedding.expire_late(out, now_s)
        if now_s - self._last_check_s >= self.cfg.check_interval_s:
            self._last_check_s = now_s
            self._periodic(out, now_s)
            for inst in self.instances.values():  # regrouping may have filled an idle queue
                self._pull(inst, out, now_s)
        else:
            self._pull(instance, out, now_s)

    def on_finish(
        self, request: Request, instance: str, output_tokens: int, out: Decisions, now_s: float
    ) -> None:
        self.ops.finished(instance, request.request_id)
        self.lengths.observe(request, output_tokens)
        self.selector.finished(request.request_id, output_tokens)

    def on_engine_reject(
        self, request: Request, instance: str, reason: str, out: Decisions, now_s: float
    ) -> None:
        self.ops.finished(instance, request.request_id)  # its pulled seat is free again
        self.selector.refunded(request)

    def snapshot_predictions(self, now_s: float) -> int:
        """Predict every queued request's wait from the current virtual-queue order (both the
        point and the SLO-quantile estimate); returns how many were predicted."""
        n = 0
        for name in self.vqs.names():
            order = self.vqs.order(name)
            for k, gid in enumerate(order):
                group = self.grouper.group(gid)
                for request, _ in list(group.queue):
                    rid = request.request_id
                    point = self.estimator.request_wait_s(name, group, rid, now_s, point=True)
                    wait = self.estimator.request_wait_s(name, group, rid, now_s)
                    self.accuracy.predict(rid, point, len(self.grouper), k + 1)
                    self.accuracy_quantile.predict(rid, wait, len(self.grouper), k + 1)
                    n += 1
        return n

    def describe(self, request_id: str) -> dict[str, str | int | float]:
        group = self.grouper.group_of(request_id)
        if group is None:
            return {}
        out: dict[str, str | int | float] = {
            "slomesh.group": group.group_id,
            "slomesh.group_size": group.size,
            "slomesh.position_in_group": group.position_of(request_id),
        }
        q = self.vqs.queue_of(group.group_id)
        if q is not None:
            out["slomesh.virtual_queue"] = q
            out["slomesh.vq_position"] = self.vqs.position(group.group_id)
        return out

    def on_abort(self, request_id: str, out: Decisions, now_s: float) -> None:
        if self.grouper.group_of(request_id) is not None:
            self._drop_queued(request_id)

    def on_instance_lost(self, instance: str, out: Decisions, now_s: float) -> None:
        """An instance failed or left: its groups and unfinished requests return to the queue."""
        self.stats.instances_lost += 1
        self._leave(instance, self.ops.drop_instance(instance), out, now_s)

    def on_instance_handed_over(self, instance: str, out: Decisions, now_s: float) -> None:
        """Another scheduler shard took the instance over: what it holds runs on there and stays
        booked here (its finishes come here; what it holds evicted resumes), only its groups go
        to the other instances. Queued again, its requests would take seats twice."""
        self._leave(instance, self.ops.hand_over(self.instances.get(instance), out), out, now_s)

    def _leave(self, instance: str, requeue: list[Placed], out: Decisions, now_s: float) -> None:
        self.instances.pop(instance, None)
        self.vqs.drop_instance(instance)
        for placed in requeue:
            self.selector.refunded(placed.request)
            self.grouper.assign(placed.request, placed.estimate, now_s)
            self.selector.queued(placed.request)
        self._place_new_groups(out, now_s)
        self._replan(out, now_s, force=True)
        for inst in self.instances.values():
            self._pull(inst, out, now_s)

    # ---- internals ---------------------------------------------------------------------------
    def _sync(self, instances: Sequence[InstanceView]) -> None:
        for inst in instances:
            if inst.name not in self.instances:
                self.instances[inst.name] = inst
                self.vqs.add_instance(inst.name)
                self.ops.add_instance(inst.name)

    def _queued(self) -> bool:
        return any(g.size for g in self.grouper.groups())

    def _direct_candidates(
        self, request: Request, instances: Sequence[InstanceView]
    ) -> list[InstanceView]:
        """Instances a tight request may go to directly (tight_classes.direct_candidates)."""
        models = {
            name: [self.grouper.group(g).model for g in self.vqs.order(name)]
            for name in self.vqs.names()
        }
        return direct_candidates(self.cfg.tight, request, instances, models, self._models_seen)

    def _eligible(self, group: RequestGroup) -> list[str]:
        pinned = self._pinned.get(group.group_id)
        if pinned is not None and pinned in self.instances:
            return [pinned]
        return self.ops.swap_plan.hosts(group)

    def _place_new_groups(self, out: Decisions, now_s: float) -> None:
        """Put groups that are in no virtual queue at their deadline position (no solver)."""
        for group in self.grouper.groups():
            if group.group_id in self.vqs or group.size == 0:
                continue
            names = self.ops.swap_plan.hosts(group)
            if not names:
                continue
            if self.cfg.lso.balance:  # the shortest wait, counting a swap where one is needed
                wait = self.estimator.backlog_s
                swap = self.ops.swap_plan.placement_cost_s
                target = min(names, key=lambda n: wait(n, now_s) + swap(self.instances[n], group))
            else:
                target = names[self._rr % len(names)]
                self._rr += 1
                self._pinned[group.group_id] = target
            order = self.vqs.order(target)
            pos = len(order)
            for k, gid in enumerate(order):
                other = self.grouper.group(gid)
                if other.earliest_deadline_abs_s > group.earliest_deadline_abs_s:
                    pos = k
                    break
            self.vqs.insert(target, group.group_id, pos)
        self._prewarm(out)

    def _predicted_wait(self, request: Request, group: RequestGroup, now_s: float) -> float | None:
        q = self.vqs.queue_of(group.group_id)
        if q is None:
            return None
        wait = self.estimator.request_wait_s(q, group, request.request_id, now_s)
        if not self.cfg.rwt_error.widen:
            return wait
        point = self.estimator.request_wait_s(q, group, request.request_id, now_s, point=True)
        return self.rwt_error.widen(point, wait)

    def _groups_ahead(self, group: RequestGroup) -> int:
        q = self.vqs.queue_of(group.group_id)
        return 0 if q is None else self.vqs.position(group.group_id) + 1

    def _periodic(self, out: Decisions, now_s: float) -> None:
        if self.grouper.due(now_s):
            result = self.grouper.recluster(now_s)
            if result.created or result.removed:
                self.stats.reclusters += 1
                for gid in result.removed:
                    self.vqs.remove(gid)
                    self._pinned.pop(gid, None)
                self._place_new_groups(out, now_s)
        late = set(self.estimator.violating_groups(now_s)) - self._accepted_late
        if late:
            self.shedding.on_late(late, out, now_s)
            self.stats.predicted_violations += 1
            self._replan(out, now_s)
        elif self.cfg.lso.balance and self.estimator.imbalanced(now_s):
            self.stats.rebalances += 1
            self._replan(out, now_s)

    def _replan(self, out: Decisions, now_s: float, force: bool = False) -> bool:
        if not force and now_s - self._last_plan_s < self.cfg.replan_min_interval_s:
            return False
        self._last_plan_s = now_s
        jobs, slots = self.estimator.problem(now_s, self._eligible)
        if not jobs:
            return False
        plan = self.scheduler.plan(jobs, slots)
        self.stats.replans += 1
        self.stats.solver_s += plan.solve_s
        self.stats.reordered_groups += self.vqs.replace(plan.order)
        # the best plan still leaves these late: re-solving cannot help until something changes
        self._accepted_late = set(plan.violating)
        self._prewarm(out)
        return True

    def _prewarm(self, out: Decisions) -> None:
        if self.cfg.lso.swap:
            for name, inst in self.instances.items():
                models = [self.grouper.group(gid).model for gid in self.vqs.order(name)]
                self.ops.swap_plan.warm_next(inst, models, out)

    def _pull(self, inst: InstanceView, out: Decisions, now_s: float) -> None:
        self.ops.pull(inst, out, now_s, self._on_pulled, self.estimator.room_wait_s(inst.name))

    def _on_pulled(self, placed: Placed, now_s: float) -> None:
        waited = now_s - placed.request.arrival_s
        self.accuracy.observe(placed.request.request_id, waited)
        self.accuracy_quantile.observe(placed.request.request_id, waited)
        self.rwt_error.observe(placed.request.request_id, waited)

    def _push(self, request: Request, out: Decisions, now_s: float) -> None:
        """Pulling switched off: hand the request to its group's instance at once."""
        group = self.grouper.group_of(request.request_id)
        if group is None:
            return
        q = self.vqs.queue_of(group.group_id)
        if q is None:
            return
        self.ops.dispatch(self.instances[q], group, request, out, now_s, self._on_pulled)

    def _drop_queued(self, request_id: str) -> None:
        group = self.grouper.group_of(request_id)
        if group is not None:
            self.selector.left_queue(group.queue[group.position_of(request_id)][0])
        self.grouper.remove(request_id)
        if group is not None and group.size == 0:
            self.vqs.remove(group.group_id)
