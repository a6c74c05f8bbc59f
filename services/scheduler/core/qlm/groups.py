"""QLM request groups (paper Section 4, Algorithm 1; services/scheduler/README.md, "QLM").

A request group holds queued requests of one model and one SLO class with similar input and
predicted output lengths, served FCFS inside the group. The `Grouper` owns every queued request:
arrivals join the nearest group of their partition incrementally (no k-means on the hot path),
groups larger than `avg_batch_size·δ` are split in half, and `recluster` periodically re-runs
Algorithm 1 (k-means, then splitting) over each partition that changed.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from services.scheduler.core.qlm.clustering import GroupingConfig as GroupingConfig
from services.scheduler.core.qlm.clustering import Member as Member
from services.scheduler.core.qlm.clustering import OutputEstimate as OutputEstimate
from services.scheduler.core.qlm.clustering import RegroupResult as RegroupResult
from services.scheduler.core.qlm.clustering import features as features
from services.scheduler.core.qlm.clustering import plan_partition, split_halves
from shared.domain import Request

PartitionKey = tuple[str, str, float, str, int]
"""(model, SLO class, relative TTFT deadline, tenant, criticality): groups never span two
partitions, so a group belongs to one tenant and one band (fairness picks among them)."""


def partition_of(request: Request) -> PartitionKey:
    """The partition a request's group belongs to."""
    return (
        request.model,
        request.slo.class_name,
        request.slo.ttft_deadline_s,
        request.tenant,
        request.criticality,
    )


@dataclass(eq=False, slots=True)
class RequestGroup:
    """Queued requests of one partition, FCFS (by arrival) inside the group.

    Aggregates are kept incrementally, so size, centroid and output_stats are O(1) (the max is
    recomputed only after its holder leaves). A group owned by a `Grouper` must be changed only
    through the Grouper (assign / remove / pop_head), which keeps its index up to date.
    """

    group_id: str
    model: str
    slo_class: str
    ttft_deadline_s: float
    """Relative TTFT SLO of the class (seconds after arrival)."""
    created_s: float
    tenant: str = "default"
    """Tenant of every member (groups never mix tenants)."""
    criticality: int = 0
    """Band of every member (higher is more critical; negative: sheddable)."""
    queue: deque[Member] = field(default_factory=deque, init=False)
    """Queued members in FCFS order (ascending arrival_s; ties in insertion order)."""
    _members: dict[str, Member] = field(default_factory=dict, init=False, repr=False)
    _sum_fx: float = field(default=0.0, init=False, repr=False)
    _sum_fy: float = field(default=0.0, init=False, repr=False)
    _input_sum: int = field(default=0, init=False, repr=False)
    _mean_sum: float = field(default=0.0, init=False, repr=False)
    _mean_sq_sum: float = field(default=0.0, init=False, repr=False)
    _var_sum: float = field(default=0.0, init=False, repr=False)
    _max_out: int | None = field(default=0, init=False, repr=False)
    """Largest member max_tokens; None: stale, recompute on demand."""

    @property
    def size(self) -> int:
        return len(self.queue)

    @property
    def partition(self) -> PartitionKey:
        return (self.model, self.slo_class, self.ttft_deadline_s, self.tenant, self.criticality)

    @property
    def centroid(self) -> tuple[float, float]:
        """Mean feature point of the queued members ((0, 0) for an empty group)."""
        n = len(self.queue)
        return (self._sum_fx / n, self._sum_fy / n) if n else (0.0, 0.0)

    @property
    def earliest_deadline_abs_s(self) -> float:
        """min(arrival + TTFT SLO) over queued members: the head's, as the queue is by arrival."""
        return self.queue[0][0].ttft_deadline_abs_s if self.queue else math.inf

    @property
    def input_tokens_sum(self) -> int:
        return self._input_sum

    @property
    def output_tokens_mean_sum(self) -> float:
        """Sum of the members' predicted mean output tokens."""
        return self._mean_sum

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._members

    def estimate_of(self, request_id: str) -> OutputEstimate:
        """The output estimate a queued member came with; KeyError if not queued here."""
        return self._members[request_id][1]

    def arrival_of(self, request_id: str) -> float:
        """Arrival time of a queued member; KeyError if not queued here."""
        return self._members[request_id][0].arrival_s

    def position_of(self, request_id: str) -> int:
        """0-based FCFS position of a queued member (0 = head); KeyError if not queued here."""
        if request_id in self._members:
            for i, (request, _) in enumerate(self.queue):
                if request.request_id == request_id:
                    return i
        raise KeyError(request_id)

    def head(self) -> Member | None:
        """The member served next (FCFS), or None when empty."""
        return self.queue[0] if self.queue else None

    def head_request(self) -> Request:
        """The request served next (FCFS); IndexError when empty."""
        return self.queue[0][0]

    def add(self, request: Request, estimate: OutputEstimate) -> None:
        """Insert in arrival order (O(1) for in-order arrivals: the scan starts at the tail)."""
        i = len(self.queue)
        while i > 0 and self.queue[i - 1][0].arrival_s > request.arrival_s:
            i -= 1
        if i == len(self.queue):
            self.queue.append((request, estimate))
        else:
            self.queue.insert(i, (request, estimate))
        self._account(request, estimate, +1)

    def pop_head(self) -> Member:
        """Remove and return the head member; IndexError when empty."""
        member = self.queue.popleft()
        self._account(*member, -1)
        return member

    def remove(self, request_id: str) -> bool:
        """Remove a member by id; False if it is not queued here."""
        if request_id not in self._members:
            return False
        for i, member in enumerate(self.queue):
            if member[0].request_id == request_id:
                del self.queue[i]
                self._account(*member, -1)
                return True
        return False

    def output_stats(self) -> tuple[float, float, int]:
        """(μ_o, σ_o, max_o) of the members' output lengths, as the RWT estimator uses them.

        μ_o = mean of member means; σ_o² = mean of member variances + variance of member means
        (law of total variance over the mixture of members); max_o = max member max_tokens.
        (0, 0, 0) for an empty group.
        """
        n = len(self.queue)
        if n == 0:
            return 0.0, 0.0, 0
        mu = self._mean_sum / n
        var_of_means = max(0.0, self._mean_sq_sum / n - mu * mu)
        sigma = math.sqrt(max(0.0, self._var_sum / n) + var_of_means)
        if self._max_out is None:
            self._max_out = max(est.max_tokens for _, est in self.queue)
        return mu, sigma, self._max_out

    def _reset(self, members: Iterable[Member]) -> None:
        """Replace the members (already in FCFS order) and recompute every aggregate."""
        self.queue = deque()
        self._members = {}
        self._sum_fx = self._sum_fy = self._mean_sum = self._mean_sq_sum = self._var_sum = 0.0
        self._input_sum = 0
        self._max_out = 0
        for member in members:
            self.queue.append(member)
            self._account(*member, +1)

    def _account(self, request: Request, estimate: OutputEstimate, sign: int) -> None:
        if sign > 0:
            self._members[request.request_id] = (request, estimate)
        else:
            del self._members[request.request_id]
        fx, fy = features(request, estimate)
        self._sum_fx += sign * fx
        self._sum_fy += sign * fy
        self._input_sum += sign * request.input_tokens
        self._mean_sum += sign * estimate.mean_tokens
        self._mean_sq_sum += sign * estimate.mean_tokens**2
        self._var_sum += sign * estimate.std_tokens**2
        if sign > 0 and self._max_out is not None:
            self._max_out = max(self._max_out, estimate.max_tokens)
        elif sign < 0 and self._max_out == estimate.max_tokens:
            self._max_out = None
        if not self.queue:  # back to exact zeros: no float drift survives an emptying
            self._reset(())


class Grouper:
    """Owns every queued request, each in exactly one group of its (model, SLO class) partition.

    Changes reach callers through return values: assign's group (with in-order arrivals a
    split leaves the arrival in the new half; otherwise see groups()), remove's group (dropped
    when its size is 0) and recluster's created/removed ids.
    """

    def __init__(self, config: GroupingConfig | None = None) -> None:
        self._config = config if config is not None else GroupingConfig()
        self._partitions: dict[PartitionKey, list[RequestGroup]] = {}
        self._groups: dict[str, RequestGroup] = {}
        self._where: dict[str, RequestGroup] = {}
        self._dirty: set[PartitionKey] = set()
        self._counter = 0
        self._last_recluster_s: float | None = None

    @property
    def config(self) -> GroupingConfig:
        return self._config

    @config.setter
    def config(self, config: GroupingConfig) -> None:
        """Replace the knobs (e.g. a reload); every partition is re-clustered at the next call."""
        self._config = config
        self._dirty.update(self._partitions)

    def __len__(self) -> int:
        """Queued requests."""
        return len(self._where)

    def groups(self) -> list[RequestGroup]:
        """All groups (a snapshot), partition by partition, oldest first within one."""
        return [g for groups in self._partitions.values() for g in groups]

    def group(self, group_id: str) -> RequestGroup:
        """The live group with this id; KeyError if there is none (never created, or dropped)."""
        return self._groups[group_id]

    def group_of(self, request_id: str) -> RequestGroup | None:
        return self._where.get(request_id)

    def assign(self, request: Request, estimate: OutputEstimate, now_s: float) -> RequestGroup:
        """Queue an arrival in the nearest group of its partition; returns the group it is in.

        O(groups in the partition): the nearest centroid within `join_max_distance` wins (ties
        go to the newer group), else a new group is opened. If the group then exceeds the split
        threshold it is split in half (Algorithm 1, lines 3-4; FCFS halves, see `_split`).
        """
        if request.request_id in self._where:
            raise ValueError(f"request {request.request_id!r} is already queued")
        key = partition_of(request)
        fx, fy = features(request, estimate)
        best: RequestGroup | None = None
        best_d2 = self.config.join_max_distance**2
        for g in self._partitions.get(key, ()):
            cx, cy = g.centroid
            d2 = (fx - cx) ** 2 + (fy - cy) ** 2
            if d2 <= best_d2:
                best, best_d2 = g, d2
        group = best if best is not None else self._new_group(key, now_s)
        group.add(request, estimate)
        self._where[request.request_id] = group
        self._dirty.add(key)
        if group.size > self.config.split_threshold:
            self._split(group, now_s)
        return self._where[request.request_id]

    def remove(self, request_id: str) -> RequestGroup | None:
        """Take a request out (pulled into an instance or aborted); None if it is not queued.

        Returns its former group; a group left empty is dropped (its size is then 0).
        """
        group = self._where.pop(request_id, None)
        if group is None:
            return None
        head = group.head()
        if head is not None and head[0].request_id == request_id:
            group.pop_head()
        else:
            group.remove(request_id)
        if group.size == 0:
            self._drop(group.partition, group)
        return group

    def pop_head(self, group_id: str) -> Member | None:
        """Request pulling: remove and return the group's FCFS head (None: no such group)."""
        group = self._groups.get(group_id)
        head = group.head() if group is not None else None
        if head is not None:
            self.remove(head[0].request_id)
        return head

    def due(self, now_s: float) -> bool:
        """Whether recluster_interval_s has passed since the last recluster (True before any)."""
        last = self._last_recluster_s
        return last is None or now_s - last >= self.config.recluster_interval_s

    def recluster(self, now_s: float) -> RegroupResult:
        """Re-run Algorithm 1 (k-means, then the split rule) on every partition that had an
        arrival since the last recluster (departures alone only shrink groups, so a partition
        without arrivals is left as it is); members keep FCFS order inside the new groups.

        A new part continues an old group (same id and object) when each holds a strict
        majority of the other (`clustering.match_previous`); other old groups are removed and
        other parts get new ids, in FCFS order of their oldest member.
        """
        self._last_recluster_s = now_s
        created: list[str] = []
        removed: list[str] = []
        for key in [k for k in self._partitions if k in self._dirty]:
            old = self._partitions[key]
            members = sorted((m for g in old for m in g.queue), key=lambda m: m[0].arrival_s)
            points = np.array([features(*m) for m in members], dtype=np.float64).reshape(-1, 2)
            previous = [self._where[r.request_id].group_id for r, _ in members]
            sizes = {g.group_id: g.size for g in old}
            parts, matches = plan_partition(points, previous, sizes, self.config)
            kept = {gid for gid in matches if gid is not None}
            for g in list(old):
                if g.group_id not in kept:
                    self._drop(key, g)
                    removed.append(g.group_id)
            new_list: list[RequestGroup] = []
            for rows, gid in zip(parts, matches, strict=True):
                group = self._groups[gid] if gid is not None else self._new_group(key, now_s)
                if gid is None:
                    created.append(group.group_id)
                part = [members[i] for i in rows]
                same = len(part) == group.size and all(
                    a is b for a, b in zip(part, group.queue, strict=True)
                )
                if not same:  # a kept group with the same members is left untouched
                    self._fill(group, part)
                new_list.append(group)
            self._partitions[key] = new_list
        self._dirty.clear()
        return RegroupResult(created=tuple(created), removed=tuple(removed))

    def _split(self, group: RequestGroup, now_s: float) -> None:
        """Algorithm 1's split rule (`split_halves`, FCFS halves) on one oversized group: the
        older half stays in `group` (same id and virtual-queue slot), the newer one is new."""
        parts = split_halves(list(group.queue), self.config.split_threshold)
        key = group.partition
        self._fill(group, parts[0])
        for part in parts[1:]:
            self._fill(self._new_group(key, now_s), part)

    def _fill(self, group: RequestGroup, members: list[Member]) -> None:
        group._reset(members)
        for request, _ in members:
            self._where[request.request_id] = group

    def _new_group(self, key: PartitionKey, now_s: float) -> RequestGroup:
        model, slo_class, ttft_s, tenant, criticality = key
        gid = f"{model}/{slo_class}/{self._counter}"
        self._counter += 1
        group = RequestGroup(gid, model, slo_class, ttft_s, now_s, tenant, criticality)
        self._groups[gid] = group
        self._partitions.setdefault(key, []).append(group)
        return group

    def _drop(self, key: PartitionKey, group: RequestGroup) -> None:
        del self._groups[group.group_id]
        partition = self._partitions[key]
        partition.remove(group)
        if not partition:
            del self._partitions[key]
