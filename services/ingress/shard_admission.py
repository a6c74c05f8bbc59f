"""The ingress's calls to the scheduler shards: Admit through a request's shards in order
(failing over at once from one that is UNAVAILABLE), and their Health together
(shard_router.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from services.ingress.args import IngressArgs
from services.ingress.core.errors import APIError
from services.ingress.shard_router import ShardRouter
from shared.rpc.client import CallFailed, MeshClient
from shared.rpc.slomesh.v1 import scheduler_pb2


class ShardedAdmission:
    """Mixed into the Pipeline, whose attributes it uses."""

    args: IngressArgs
    client: MeshClient
    shards: ShardRouter
    admitted_by: dict[str, str]

    async def _admit_call(self, message: scheduler_pb2.AdmitRequest) -> Any:
        """scheduler.Admit on the request's shard (shard_router.py), on the next one at once
        when it is UNAVAILABLE (a shard that died: its queue died with it), and retried while
        every shard is, until admit_timeout_s is spent; then 503. A request queued in a
        shard that dies is so admitted again by another, or answered with a clear error."""
        deadline = time.monotonic() + self.args.admit_timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                return await self._admit_on_shards(message, left)
            except CallFailed as err:
                if err.code != "UNAVAILABLE" or left < 1.0:
                    raise APIError(
                        503,
                        f"scheduler unavailable: {err.code}",
                        "server_overloaded",
                        None,
                        "service_unavailable",
                        1.0,
                    ) from None
            await asyncio.sleep(0.5)

    async def _admit_on_shards(self, message: scheduler_pb2.AdmitRequest, left: float) -> Any:
        """Admit through the request's shards in order, the next one at once when one is
        UNAVAILABLE; raises the last failure when none answered."""
        rid = message.meta.request_id
        failure: CallFailed | None = None
        for shard in self.shards.order(message.meta.model, rid):
            self.admitted_by[rid] = shard
            call = self.client.call(shard, "scheduler", "Admit", message, max(left, 0.1))
            try:
                if not self.shards.polling:
                    return await call
                return await self.shards.unless_down(shard, call)
            except CallFailed as err:
                if err.code != "UNAVAILABLE":
                    raise
                self.shards.failed(shard)
                failure = err
        assert failure is not None
        raise failure

    def scheduler_of(self, request_id: str) -> str:
        """The shard that admitted `request_id` (the first known one before admission)."""
        return self.admitted_by.get(request_id) or next(iter(self.shards.table))

    async def _shard_health(self) -> list[scheduler_pb2.HealthReply]:
        """Every answering shard's Health (one shard: its answer; it may name peers, which
        turns the shard table's polling on); raises CallFailed when none answers."""
        if not self.shards.polling:
            shard = next(iter(self.shards.table))
            reply = await self.client.call(
                shard, "scheduler", "Health", scheduler_pb2.HealthQuery(), timeout_s=1.0
            )
            self.shards.learn(shard, reply)
            return [reply]
        replies = await self.shards.refresh()
        if not replies:
            raise CallFailed("scheduler", "UNAVAILABLE", "no shard answers")
        return replies
