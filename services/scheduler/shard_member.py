"""The scheduler deployment's side as one shard of several (shard_peers.py): ownership changes,
the peers' `Exchange` RPC and what `Health` tells ingresses about the shards."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from services.scheduler.admission_counts import AdmissionCounts
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.leasing import LeaseDesk
from services.scheduler.shard_peers import ShardPeers
from shared.rpc.mesh_auth import require_mesh_credential
from shared.rpc.slomesh.v1 import scheduler_pb2


class ShardMember:
    """Mixed into SchedulerDeployment, whose attributes it uses."""

    core: AdmissionCore
    shards: ShardPeers
    leases: LeaseDesk
    counts: AdmissionCounts
    answered: set[str]
    _tasks: set[asyncio.Task[None]]

    def _dispatch(self) -> None: ...

    async def _probe(self, names: list[str]) -> None: ...

    def _start_reconciler(self) -> None: ...

    def _owned_changed(self, gained: set[str], lost: set[str]) -> None:
        """Shard ownership moved (shard_peers.py): replicas handed to another shard are
        unavailable here at once (their queued work re-planned over the rest, the requests
        they run for this shard kept in their books: AdmissionCore.hand_over); those taken
        over are probed now and serve from their first answer."""
        now = time.time()
        for name in lost:
            self.core.hand_over(name, now)
        self._dispatch()
        if gained:
            task = asyncio.get_running_loop().create_task(self._probe(sorted(gained)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def shard_health(self) -> dict[str, Any]:
        """HealthReply fields of the shards: this one's name, the live shards, its ready
        replicas per model (ingresses route by them: services/ingress/shard_router.py), and the
        requests it admitted (benchmarks divide its CPU by them), of them on lease credits."""
        return {
            "shard": self.shards.cfg.name,
            "shards": self.shards.live(),
            "usage_staleness_s": self.shards.staleness_s,
            "max_usage_staleness_s": self.shards.max_staleness_s,
            "admitted_total": self.counts.admitted,
            "fast_path_total": self.counts.fast_path,
            "replicas": [
                scheduler_pb2.ModelReplicas(model=m, ready=n)
                for m, n in self.shards.ready_counts(self._ready).items()
            ],
        }

    def _ready(self, application: str) -> bool:
        rep = self.core.replicas[application]
        return rep.healthy and application in self.answered

    async def AdmissionCounts(self, grpc_context: Any = None) -> dict[str, Any]:
        """This shard's admission counters since it started (admission_counts.py): a Serve
        handle call for benchmarks, not a gRPC method."""
        require_mesh_credential(grpc_context, "scheduler.AdmissionCounts")
        return self.counts.snapshot()

    async def Exchange(
        self,
        request: scheduler_pb2.ShardUsage,
        grpc_context: Any = None,
        trace_headers: dict[str, str] | None = None,
    ) -> scheduler_pb2.ShardUsage:
        """A peer shard's tenant usage and view of the shards; answered with this shard's."""
        require_mesh_credential(grpc_context, "scheduler.Exchange")
        self._start_reconciler()
        self.shards.receive(request)
        return self.shards.snapshot()
