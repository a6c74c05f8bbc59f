"""QLM's serving operations on one instance (QLM §5): pulling, eviction/resume, pushing.

Pulling: while the engine holds fewer than `pull_window_requests` waiting requests, take the next
request (FCFS) of the head group of the instance's virtual queue. A head group of another model is
pulled too: the policy decides the swap (a ModelSwap), the engine drains its batch and loads the
model, and the planner has already batched groups by model so this happens once per run of groups;
swap_plan.py may hold a group of another model back until it is due.
Eviction: when the head group's SLO is tighter than that of requests the instance already holds and
the engine has no room (requests waiting, KV nearly full), evict the loosest of them - the most
recently pulled first - until the head's next requests fit; their KV goes to host memory when that
is cheaper than recompute (the engine's `auto` preemption mode decides).
Resume: evicted requests return (oldest first) once no tighter group waits at the head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.scheduler.core.cluster_view import InstanceView
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.fairness.selector import GroupSelector
from services.scheduler.core.qlm.config import QLMConfig
from services.scheduler.core.qlm.groups import Grouper, OutputEstimate, RequestGroup
from services.scheduler.core.qlm.swap_plan import SwapPlan, SwapPlanConfig
from services.scheduler.core.qlm.tight_classes import eviction_pays
from services.scheduler.core.qlm.virtual_queues import VirtualQueues
from shared.domain import Request

KV_FULL_FRACTION = 0.9
"""KV use above which an engine with waiting requests counts as out of memory."""


@dataclass(slots=True)
class Placed:
    """A request an instance holds, with the estimate it was scheduled with."""

    request: Request
    estimate: OutputEstimate
    pulled_s: float


OnPulled = Callable[[Placed, float], None]


class ServingOps:
    def __init__(
        self,
        cfg: QLMConfig,
        grouper: Grouper,
        vqs: VirtualQueues,
        selector: GroupSelector | None = None,
        swap_plan: SwapPlan | None = None,
    ) -> None:
        self.cfg = cfg
        self.grouper = grouper
        self.vqs = vqs
        self.selector = selector if selector is not None else GroupSelector(cfg.tenancy)
        """Bands and tenant fairness: which non-empty group of a queue is served next."""
        self.swap_plan = swap_plan or SwapPlan(SwapPlanConfig(), lambda inst, group: 0.0)
        """Which groups of other models an instance may serve, and its swap decisions."""
        self.placed: dict[str, dict[str, Placed]] = {}
        self.evicted: dict[str, list[str]] = {}
        self.evictions = 0
        self.evictions_declined = 0
        """Evictions not made because their cost exceeded what they save (eviction.weigh_cost)."""
        self.direct_dispatches = 0
        """Requests of tight classes placed at arrival, past the virtual queues."""
        self.resumes = 0

    def add_instance(self, name: str) -> None:
        self.placed.setdefault(name, {})
        self.evicted.setdefault(name, [])

    def finished(self, instance: str, request_id: str) -> None:
        self.placed.get(instance, {}).pop(request_id, None)
        ev = self.evicted.get(instance)
        if ev and request_id in ev:
            ev.remove(request_id)

    def drop_instance(self, instance: str) -> list[Placed]:
        """Forget a lost instance; returns the requests it held, to be queued again."""
        self.evicted.pop(instance, None)
        self.swap_plan.forget(instance)
        return list(self.placed.pop(instance, {}).values())

    def hand_over(self, inst: InstanceView | None, out: Decisions) -> list[Placed]:
        """An instance another scheduler shard took over: what it holds stays booked (it runs
        on there), what it holds evicted is resumed (no pull here will resume it), and nothing
        is returned to be queued again."""
        if inst is not None:
            out.resume(inst, self.evicted.get(inst.name, []))
            self.evicted[inst.name] = []
            self.swap_plan.forget(inst.name)
        return []

    def head(self, instance: str) -> RequestGroup | None:
        """The group `instance` serves next: the first non-empty one of its virtual queue, as
        bands and tenant fairness choose (fairness/selector.py)."""
        groups = [
            g for g in (self.grouper.group(gid) for gid in self.vqs.order(instance)) if g.size
        ]
        return self.selector.choose(groups)

    def _next(self, inst: InstanceView, now_s: float) -> RequestGroup | None:
        """The group `inst` serves next: the head of its queue among the groups the swap plan
        lets it serve now (swap_plan.py)."""
        groups = [
            g for g in (self.grouper.group(gid) for gid in self.vqs.order(inst.name)) if g.size
        ]
        return self.selector.choose(self.swap_plan.servable(inst, groups, now_s))

    def _steal(self, inst: InstanceView, now_s: float) -> RequestGroup | None:
        """An instance whose own queue is empty serves the most urgent head group of another
        queue (load balancing without migrating running work) that the swap plan lets it
        serve. None when there is nothing."""
        heads: list[RequestGroup] = []
        for other in self.vqs.names():
            if other == inst.name:
                continue
            g = self.head(other)
            if g is not None and inst.serves(g.model) and not self.swap_plan.displaces(inst, g):
                heads.append(g)
        heads.sort(key=lambda g: g.earliest_deadline_abs_s)
        return self.selector.choose(self.swap_plan.servable(inst, heads, now_s))

    def dispatch(
        self,
        inst: InstanceView,
        group: RequestGroup,
        request: Request,
        out: Decisions,
        now_s: float,
        on_pulled: OnPulled,
    ) -> None:
        estimate = group.estimate_of(request.request_id)
        self.grouper.remove(request.request_id)
        if group.size == 0:
            self.vqs.remove(group.group_id)
        self.selector.left_queue(request)
        self.selector.dispatched(request, estimate.mean_tokens)
        placed = Placed(request, estimate, now_s)
        self.placed[inst.name][request.request_id] = placed
        on_pulled(placed, now_s)
        out.place(request, inst)

    def place(
        self,
        inst: InstanceView,
        request: Request,
        estimate: OutputEstimate,
        out: Decisions,
        now_s: float,
        leased: bool = False,
    ) -> None:
        """Hand a request that skipped the virtual queues (a tight class) to `inst` at once."""
        self.selector.dispatched(request, estimate.mean_tokens)
        self.placed[inst.name][request.request_id] = Placed(request, estimate, now_s)
        self.direct_dispatches += 1
        out.place(request, inst, leased=leased)

    def pull(
        self,
        inst: InstanceView,
        out: Decisions,
        now_s: float,
        on_pulled: OnPulled,
        room_wait_s: float = 0.0,
    ) -> None:
        """Fill `inst`'s engine window from its queue head. room_wait_s: how long the head
        would wait for room without eviction (evict only when its slack is shorter)."""
        if not self.cfg.lso.pull:
            return
        window = self.cfg.pull_window_requests
        while True:
            head = self._next(inst, now_s)
            if head is None and self.cfg.lso.balance:
                head = self._steal(inst, now_s)
            if self._resume_one(inst, head, out):
                continue
            if head is None:
                return
            if inst.status().waiting >= window:
                urgent = head.earliest_deadline_abs_s - now_s < room_wait_s
                if (
                    urgent
                    and self.cfg.lso.evict
                    and self._evict_for(inst, head, out, now_s, room_wait_s)
                ):
                    # room was made for the head: its next requests go in now, past the window
                    for _ in range(window):
                        if head.size == 0 or not self.swap_plan.ready(inst, head, out):
                            break
                        self.dispatch(inst, head, head.head_request(), out, now_s, on_pulled)
                return
            if not self.swap_plan.ready(inst, head, out):
                return  # the old model's waiting requests run first
            self.dispatch(inst, head, head.head_request(), out, now_s, on_pulled)

    def _resume_one(self, inst: InstanceView, head: RequestGroup | None, out: Decisions) -> bool:
        ev = self.evicted[inst.name]
        if not ev or inst.status().waiting >= self.cfg.pull_window_requests:
            return False
        placed_here = self.placed[inst.name]
        ev.sort(key=lambda r: placed_here[r].request.ttft_deadline_abs_s if r in placed_here else 0)
        rid = ev[0]
        placed = placed_here.get(rid)
        if (
            placed is not None
            and head is not None
            and head.earliest_deadline_abs_s < placed.request.ttft_deadline_abs_s
        ):
            return False  # the head is more urgent (EDF): keep it evicted
        ev.pop(0)
        if placed is not None:
            out.resume(inst, [rid])
            self.resumes += 1
        return True

    def _evict_for(
        self,
        inst: InstanceView,
        head: RequestGroup,
        out: Decisions,
        now_s: float,
        room_wait_s: float = 0.0,
    ) -> bool:
        """Evict looser requests so the head group's next requests fit. True if any was evicted."""
        status = inst.status()
        if status.active_model != head.model:
            return False
        kv_short = (
            not status.kv_total_blocks
            or status.kv_used_blocks >= KV_FULL_FRACTION * status.kv_total_blocks
        )
        if not kv_short:
            return False
        evicted = set(self.evicted[inst.name])
        bands = self.cfg.tenancy.bands
        victims = [
            p
            for rid, p in self.placed[inst.name].items()
            if rid not in evicted
            and (
                (bands and p.request.criticality < head.criticality)
                or (
                    p.request.criticality <= head.criticality
                    and p.request.slo.ttft_deadline_s > head.ttft_deadline_s
                    and p.request.ttft_deadline_abs_s > head.earliest_deadline_abs_s
                )
            )
        ]
        if not victims:
            return False
        # lower bands first (sheddable work is evicted first), then the loosest, newest
        victims.sort(
            key=lambda p: (p.request.criticality, -p.request.slo.ttft_deadline_s, -p.pulled_s)
        )
        need = _tokens_of_next(head, self.cfg.pull_window_requests)
        chosen: list[str] = []
        freed = 0.0
        for p in victims:
            if freed >= need:
                break
            chosen.append(p.request.request_id)
            freed += p.request.input_tokens + p.estimate.mean_tokens
        if not self._eviction_pays(inst, head, chosen, now_s, room_wait_s):
            return False
        done = out.evict(inst, chosen)
        self.evicted[inst.name].extend(done)
        self.evictions += len(done)
        return bool(done)

    def _eviction_pays(
        self,
        inst: InstanceView,
        head: RequestGroup,
        chosen: list[str],
        now_s: float,
        room_wait_s: float,
    ) -> bool:
        """tight_classes.eviction_pays for these victims (their prompt plus the output they
        have generated by now, estimated as half their predicted mean) and the head's next
        requests."""
        cfg = self.cfg.eviction
        if not cfg.weigh_cost:
            return True
        try:
            profile = inst.profile(head.model)
        except ValueError:
            profile = None
        placed = self.placed[inst.name]
        victims = [
            placed[r].request.input_tokens + 0.5 * placed[r].estimate.mean_tokens for r in chosen
        ]
        window = self.cfg.pull_window_requests
        prompts = [r.input_tokens for k, (r, _) in enumerate(head.queue) if k < window]
        slack = head.earliest_deadline_abs_s - now_s
        verdict = eviction_pays(cfg, profile, prompts, victims, slack, room_wait_s)
        if not verdict.pays:
            self.evictions_declined += 1
        return verdict.pays


def _tokens_of_next(group: RequestGroup, n: int) -> float:
    """KV tokens (prompt + predicted output) the group's next `n` requests will need."""
    total = 0.0
    for k, (request, estimate) in enumerate(group.queue):
        if k >= n:
            break
        total += request.input_tokens + estimate.mean_tokens
    return total
