"""The scheduler's ready replicas as `slomesh up` polls them (slomesh/launch/scheduler_poll.py)
over Serve handles that behave as Serve's: one cached handle per application, its router either
on a thread of its own or on the event loop of its first caller (a process started from one
that runs a mesh inherits RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0). Each shard's counts are
summed."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
import yaml

from shared.rpc.slomesh.v1 import scheduler_pb2
from slomesh.launch.mesh import DEPLOY_DIR
from slomesh.launch.readiness import scheduler_apps, wait_for_replicas
from slomesh.launch.scheduler_poll import ready_replicas_poll
from slomesh.launch.shards import with_shards
from slomesh.stacks import load_stack
from slomesh.stacks.live import apply_stack


def _reply(counts: dict[str, int]) -> scheduler_pb2.HealthReply:
    reps = [scheduler_pb2.ModelReplicas(model=m, ready=n) for m, n in counts.items()]
    return scheduler_pb2.HealthReply(replicas=reps)


class CallerLoopHandle:
    """A Serve handle whose router runs on its caller's event loop: its first call binds the
    router to the running loop; with no running loop it fails as Serve's does, and a call from
    another loop finds the router's tasks gone with the first one."""

    def __init__(self, answers: list[dict[str, int]]) -> None:
        self.Health = self
        self.answers = answers
        self.loop: asyncio.AbstractEventLoop | None = None
        self.calls = 0

    def remote(self, query: scheduler_pb2.HealthQuery) -> Coroutine[Any, Any, Any]:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "No event loop running. You cannot use a handle initialized with "
                "`_run_router_in_separate_loop=False` when not inside an asyncio event loop."
            ) from None
        self.loop = self.loop or loop
        if loop is not self.loop:
            raise RuntimeError("the handle's router runs on another (closed) event loop")
        self.calls += 1
        return self._answer()

    def shutdown(self) -> None:
        """Serve's: the router's stop is scheduled on the loop it runs on, not awaited."""
        assert self.loop is not None
        self.loop.call_soon(lambda: None)

    async def _answer(self) -> scheduler_pb2.HealthReply:
        await asyncio.sleep(0)  # the router's hop to the replica
        return _reply(self.answers[min(self.calls, len(self.answers)) - 1])


def _many_models(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((DEPLOY_DIR / "local-many-models.yaml").read_text())
    return apply_stack(config, load_stack(stack))


def test_a_poll_on_a_handle_routed_on_its_callers_loop_sees_the_replicas_come_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What hung `slomesh up` beside a second mesh: a blocking `.result()` on such a handle
    fails every time (no loop), and the wait took that for replicas never ready."""
    from ray import serve

    handle = CallerLoopHandle([{}, {"tiny-llama": 1}, {"tiny-llama": 1, "tiny-llama-b": 1}])
    monkeypatch.setattr(serve, "get_app_handle", lambda app: handle)
    expected = {"tiny-llama": 1, "tiny-llama-b": 1}
    with ready_replicas_poll(["scheduler"]) as ready:
        wait_for_replicas(ready, expected, 5.0, lambda s: None)
    assert handle.calls == 3
    handle.shutdown()  # what serve.shutdown does with the cached handle afterwards


def test_serve_shuts_a_handle_that_routed_on_the_polls_loop_down_afterwards(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray import serve

    handle = CallerLoopHandle([{"tiny-llama": 1}])
    monkeypatch.setattr(serve, "get_app_handle", lambda app: handle)
    with ready_replicas_poll(["scheduler"]) as ready:
        assert ready() == {"tiny-llama": 1}
    handle.shutdown()  # raised "Event loop is closed" when the poll closed its loop


def test_every_shard_of_the_scheduler_is_asked_and_their_counts_summed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each shard's Health counts only the replicas it owns."""
    from ray import serve

    config = with_shards(_many_models("slomesh"), 2)
    assert scheduler_apps(config) == ["scheduler", "scheduler-1"]
    owned = {"scheduler": {"tiny-llama": 1}, "scheduler-1": {"tiny-llama-b": 1, "tiny-llama": 1}}

    class Handle:
        def __init__(self, app: str) -> None:
            self.Health = self
            self.app = app

        def remote(self, query: scheduler_pb2.HealthQuery) -> asyncio.Future[Any]:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(_reply(owned[self.app]))
            return done

    monkeypatch.setattr(serve, "get_app_handle", Handle)
    with ready_replicas_poll(scheduler_apps(config)) as ready:
        assert ready() == {"tiny-llama": 2, "tiny-llama-b": 1}
    assert scheduler_apps({"applications": []}) == []


def test_a_scheduler_that_does_not_answer_fails_the_poll_within_its_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ray import serve

    class SilentHandle:
        def __init__(self, app: str) -> None:
            self.Health = self

        def remote(self, query: scheduler_pb2.HealthQuery) -> asyncio.Future[Any]:
            return asyncio.get_running_loop().create_future()  # never answered

    monkeypatch.setattr(serve, "get_app_handle", SilentHandle)
    with ready_replicas_poll(["scheduler"], timeout_s=0.01) as ready, pytest.raises(TimeoutError):
        ready()
