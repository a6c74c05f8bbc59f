"""A replica's state push to the scheduler (services/replica/state_push.py), on a fake client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services.replica.state_push import StatePushArgs, StatePusher
from shared.rpc.client import CallFailed
from shared.rpc.slomesh.v1 import common_pb2


class FakeClient:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.calls: list[tuple[str, str, str, Any, float | None]] = []

    async def call(
        self, app: str, kind: str, method: str, msg: Any, timeout_s: float | None = None
    ) -> Any:
        self.calls.append((app, kind, method, msg, timeout_s))
        if self.fail:
            raise CallFailed(app, "UNAVAILABLE")
        return None


def state() -> common_pb2.ReplicaState:
    return common_pb2.ReplicaState(
        replica=common_pb2.ReplicaRef(application="replica-0"),
        waiting=2,
        running=3,
        pending_prefill_tokens=1234,
    )


@pytest.mark.parametrize(("fail", "sent", "failed"), [(False, 1, 0), (True, 0, 1)])
def test_push_once_sends_the_current_state_to_update_replica(fail, sent, failed):
    pusher = StatePusher(StatePushArgs(interval_ms=100, scheduler_application="sched"), state)
    client = FakeClient(fail)
    pusher._client = client  # type: ignore[assignment]
    assert asyncio.run(pusher.push_once()) is not fail
    assert (pusher.sent, pusher.failed) == (sent, failed)
    app, kind, method, msg, timeout = client.calls[0]
    assert (app, kind, method, timeout) == ("sched", "scheduler", "UpdateReplica", 0.5)
    assert msg.pending_prefill_tokens == 1234 and msg.waiting == 2


def test_start_is_a_no_op_when_no_interval_is_set():
    async def run() -> None:
        pusher = StatePusher(StatePushArgs(), state)
        pusher.start()
        assert pusher._task is None and pusher._client is None

    asyncio.run(run())
