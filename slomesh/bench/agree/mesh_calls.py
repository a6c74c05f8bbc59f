"""What a bench asks the running mesh over Serve handles (from the process that started it):
the scheduler's ready replicas per model, before the trace, and each replica's measured swaps,
after it."""

from __future__ import annotations

from typing import Any


def ready_replicas() -> dict[str, int]:
    """The scheduler's ready replicas per model (its Health; {} while it does not answer)."""
    from ray import serve

    from shared.rpc.slomesh.v1 import scheduler_pb2

    try:
        reply = serve.get_app_handle("scheduler").Health.remote(scheduler_pb2.HealthQuery())
        return {r.model: r.ready for r in reply.result(timeout_s=10).replicas}
    except Exception:  # not up yet: asked again
        return {}


def swap_logs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each replica's measured swaps (ReplicaDeployment.SwapLog) on the running mesh."""
    from ray import serve

    out: dict[str, dict[str, Any]] = {}
    for app in config["applications"]:
        name = app["name"]
        if not name.startswith("replica-"):
            continue
        try:
            out[name] = dict(serve.get_app_handle(name).SwapLog.remote().result(timeout_s=30))
        except Exception as err:  # a report of the run: a failed call is written down, not raised
            out[name] = {"error": f"{type(err).__name__}: {err}"}
    return out
