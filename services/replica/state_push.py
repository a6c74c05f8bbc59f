"""A replica pushes its engine state to the scheduler (`UpdateReplica`, proto/slomesh/v1).

The scheduler's TTFT guard (services/scheduler/core/ttft_admission.py) predicts a request's first
token on a replica from the replica's own queue (requests waiting and running, prefill backlog),
so it does not guess from its admission counters. From the replica's first request on,
`StatePusher` sends the current `ReplicaState` every `interval_s`; a failed call is dropped (the
next one carries fresher state), so a slow or restarting scheduler never holds the replica up.
A replica also pushes its state once the moment a model swap ends (`push_soon`, on by default
with or without the interval): the scheduler's books would otherwise count it swapping, its
requests all waiting, until the next Status probe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from shared.rpc.client import CallFailed, MeshClient, Transport
from shared.rpc.slomesh.v1 import common_pb2


class StatePushArgs(BaseModel):
    """Pushing this replica's state to the scheduler (off unless `interval_ms` is set)."""

    model_config = ConfigDict(extra="forbid")

    interval_ms: float | None = Field(None, gt=0)
    """Push the ReplicaState every this many milliseconds; None: no push (the scheduler then
    sees only its own Status probes)."""
    scheduler_application: str = "scheduler"
    """Serve application name of the scheduler."""
    transport: Transport = "handle"
    """How the scheduler is called: Serve handles or the gRPC proxy."""
    timeout_ms: float = Field(500.0, gt=0)
    """Deadline of one UpdateReplica call."""
    on_swap_end: bool = True
    """Push the state once as soon as a model swap ends (a replica with swap_models), whether
    or not `interval_ms` is set."""


class StatePusher:
    def __init__(self, args: StatePushArgs, state: Callable[[], common_pb2.ReplicaState]) -> None:
        self.args = args
        self._state = state
        self._client: MeshClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._once: set[asyncio.Task[bool]] = set()
        self.sent = 0
        self.failed = 0

    def start(self) -> None:
        """Start the push loop on the running event loop (once; no-op when off)."""
        if self.args.interval_ms is None or (self._task is not None and not self._task.done()):
            return
        if self._client is None:
            self._client = MeshClient(transport=self.args.transport)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def push_soon(self) -> None:
        """Send the current state once, off the caller's path, on the running event loop
        (a swap's end; no-op with `on_swap_end` off)."""
        if not self.args.on_swap_end:
            return
        if self._client is None:
            self._client = MeshClient(transport=self.args.transport)
        task = asyncio.get_running_loop().create_task(self.push_once())
        self._once.add(task)
        task.add_done_callback(self._once.discard)

    async def push_once(self) -> bool:
        """Send the current state once; True when the scheduler took it."""
        assert self._client is not None
        try:
            await self._client.call(
                self.args.scheduler_application,
                "scheduler",
                "UpdateReplica",
                self._state(),
                self.args.timeout_ms / 1e3,
            )
        except CallFailed:
            self.failed += 1
            return False
        self.sent += 1
        return True

    async def _loop(self) -> None:
        assert self.args.interval_ms is not None
        while True:
            await self.push_once()
            await asyncio.sleep(self.args.interval_ms / 1e3)
