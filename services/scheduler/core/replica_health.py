"""Replica health in the live scheduler: Status probes, unhealthy replicas, unheld admissions.

A replica with a swap due (its swap order, or requests placed there for a model it does not
have active: LiveReplica.swap_due) is swapping, not lost, while it does not answer: restarting
an engine takes the host's CPUs for seconds (an engine process stops, another starts and loads),
which can starve the replica's event loop on a small host, so its missed probes are excused
until `swap_grace_factor` times the profile's swap time has passed since the first of them
(`probe_verdict`). Only then do `failures_to_unhealthy` misses in a row make it unhealthy, and
with it its queued work re-planned elsewhere. A replica found gone (an ingress's stream
refused) is unhealthy at once, swap or not.

A mixin of AdmissionCore (core/admission.py): the books it keeps are AdmissionCore's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.scheduler.core.events import ReplicaState
from services.scheduler.core.live_view import LiveReplica

if TYPE_CHECKING:
    from services.scheduler.core.cluster_core import ClusterCore
    from services.scheduler.core.output import ClusterOutput
    from shared.domain import Request


def probe_verdict(
    misses: int,
    missed_for_s: float,
    failures_to_unhealthy: int,
    expected_swap_s: float,
    swap_grace_factor: float,
) -> bool:
    """Whether a replica is unhealthy after `misses` missed probes in a row, the first one
    `missed_for_s` ago, given the swap time it is expected to take (0: no swap due)."""
    if misses < failures_to_unhealthy:
        return False
    return missed_for_s >= expected_swap_s * swap_grace_factor


class ReplicaHealth:
    replicas: dict[str, LiveReplica]
    core: ClusterCore
    max_in_flight: int
    max_queued: int
    released: int
    _queued: dict[str, Request]
    _owner: dict[str, LiveReplica]
    _probe_failures: dict[str, tuple[int, float]]
    excused_misses: int

    if TYPE_CHECKING:  # AdmissionCore's

        def _book(self, out: ClusterOutput) -> None: ...

        def report(
            self, request_id: str, output_tokens: int = 0, now_s: float = 0.0, pull: bool = True
        ) -> LiveReplica | None: ...

    def health(self) -> tuple[bool, str]:
        """Whether a new request could be admitted now, and why not."""
        if len(self._queued) >= self.max_queued:
            return False, f"global queue full ({len(self._queued)} requests)"
        healthy = [r for r in self.replicas.values() if r.healthy]
        if not healthy:
            return False, "no replica answers"
        if all(len(r.in_flight) >= self.max_in_flight * r.engines for r in healthy):
            return False, f"every replica has {self.max_in_flight} requests in flight"
        return True, ""

    def release_unheld(
        self, application: str, held: set[str], now_s: float, lease_s: float
    ) -> list[str]:
        """Reconcile with what replica `application` reports it holds: admissions it does not
        hold after `lease_s` are released as if reported (their callers went away between
        admission and the stream's start, or died mid-stream). Returns the released ids."""
        rep = self.replicas.get(application)
        if rep is None:
            return []
        lost = rep.unheld(held, now_s, lease_s)
        for rid in lost:
            if self._owner.get(rid) is rep:
                self.report(rid, 0, now_s)
            else:  # placed again elsewhere since (re-planned while this replica was lost), or
                rep.forget(rid)  # done there: only this replica's books still hold it
        self.released += len(lost)
        return lost

    def record_probe(
        self,
        application: str,
        answered: bool,
        now_s: float,
        failures_to_unhealthy: int = 2,
        swap_grace_factor: float = 0.0,
    ) -> bool:
        """One Status probe's outcome. A replica turns unhealthy after `failures_to_unhealthy`
        failed probes in a row (one slow answer under load does not flap it), and not before
        `swap_grace_factor` times its expected swap time since the first of them while a swap
        is due (module docstring); healthy again at its first answer. True when its health
        changed (see set_health)."""
        if answered:
            self._probe_failures.pop(application, None)
            return self.set_health(application, True, now_s)
        n, since = self._probe_failures.get(application, (0, now_s))
        n += 1
        self._probe_failures[application] = (n, since)
        rep = self.replicas.get(application)
        swap_s = rep.expected_swap_s() if rep is not None and rep.healthy else 0.0
        if not probe_verdict(n, now_s - since, failures_to_unhealthy, swap_s, swap_grace_factor):
            if n >= failures_to_unhealthy:
                self.excused_misses += 1  # a swapping replica's miss
            return False
        return self.set_health(application, False, now_s)

    def hand_over(self, application: str, now_s: float) -> bool:
        """Another scheduler shard took replica `application` over (shard ownership moved, the
        replica runs on): no new placement or pull goes there from here, its queued work is
        re-planned over the others, and the requests it holds from here stay in its books,
        not queued or placed again: they run there to the end and their reports come here (a
        seat counted twice would refuse arrivals as replicas-full). It takes work again once
        it is handed back and answers a probe. True when it was available here until now."""
        rep = self.replicas.get(application)
        self._probe_failures.pop(application, None)
        if rep is None or not rep.healthy:
            return False
        rep.healthy = False
        self._book(self.core.handle(ReplicaState(application, False, True, now_s=now_s)))
        return True

    def set_health(self, application: str, healthy: bool, now_s: float) -> bool:
        """Record whether replica `application` answers; True when that changed. A replica that
        stops answering gets no new placements or pulls and its queued work is re-planned over
        the others (policy.on_instance_lost); its requests in flight fail at the ingress, which
        reports them. It takes work again once it answers (the policy meets it again with the
        next arrival)."""
        rep = self.replicas.get(application)
        if rep is None or rep.healthy == healthy:
            return False
        rep.healthy = healthy
        self._book(self.core.handle(ReplicaState(application, healthy, now_s=now_s)))
        return True
