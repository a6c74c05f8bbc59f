"""What a bench asks the running mesh over Serve handles (from the process that started it):
each replica's measured swaps, after the trace (the scheduler's ready replicas before it:
slomesh/launch/readiness.py)."""

from __future__ import annotations

from typing import Any


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
