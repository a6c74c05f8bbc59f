"""The scheduler's ready replicas per model, asked over Serve handles from the process that
started the mesh (readiness.wait_for_replicas polls it before a start says the mesh is up).

The calls run on an event loop of the poll's own. Serve may run a handle's router on its
caller's event loop (RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0, which Serve reads from the
environment when it is imported): a process started from one that runs a mesh inherits that
setting (slomesh.launch.mesh.apply_process_env puts it in the starting process's environment),
and there a handle's blocking `.result()` has no loop to run on and fails every time. Serve keeps
one handle per application in a process, whose router stays on the loop it first ran on, so the
poll keeps one loop for all its calls (an `asyncio.run` per call would leave the router on a
closed loop)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

HEALTH_TIMEOUT_S = 10.0
"""How long one poll waits for each scheduler application's Health, seconds."""


async def ready_replicas(apps: list[str], timeout_s: float = HEALTH_TIMEOUT_S) -> dict[str, int]:
    """The ready replicas per model that the scheduler applications `apps` count (their Health
    over Serve handles: each shard counts the replicas it owns), summed. Raises when one does
    not answer within `timeout_s`."""
    from ray import serve

    from shared.rpc.slomesh.v1 import scheduler_pb2

    out: dict[str, int] = {}
    for app in apps:
        call = serve.get_app_handle(app).Health.remote(scheduler_pb2.HealthQuery())
        reply = await asyncio.wait_for(call, timeout_s)
        for r in reply.replicas:
            out[r.model] = out.get(r.model, 0) + r.ready
    return out


@contextlib.contextmanager
def ready_replicas_poll(
    apps: list[str], timeout_s: float = HEALTH_TIMEOUT_S
) -> Iterator[Callable[[], dict[str, int]]]:
    """A blocking poll of `ready_replicas(apps)`, each call on this context's one event loop
    (module docstring). The loop stays open, not running, after the context: where a handle's
    router ran on it, Serve's shutdown later schedules the router's stop there, and on a closed
    loop that raises (`serve.shutdown` then fails)."""
    loop = asyncio.new_event_loop()
    yield lambda: loop.run_until_complete(ready_replicas(apps, timeout_s))
