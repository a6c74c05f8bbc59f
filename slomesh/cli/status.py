"""`slomesh status`: each replica's engine state, asked over its Serve handle.

Serve's gRPC proxy is off by default (it binds every interface), so the operator command does
what the scheduler's probes do: `Replica.Status` over a Serve deployment handle, from a driver
that joins the running mesh's Ray cluster (`ray.init(address="auto")`, with Ray's token, which
`slomesh up` keeps in ~/.ray/auth_token). Nothing extra listens for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from shared.rpc.call_errors import status_of


def _connect() -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address="auto", log_to_driver=False, logging_level=logging.ERROR)


def replica_status(config: dict[str, Any], timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """One row per replica application of `config`: its engine state, or the error status."""
    _connect()
    names = [a["name"] for a in config["applications"] if a["name"].startswith("replica-")]
    return asyncio.run(_rows(names, timeout_s))


async def _rows(names: list[str], timeout_s: float) -> list[dict[str, Any]]:
    # on an event loop: the mesh's processes may run handle routers on the caller's loop
    # (RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0), which a blocking .result() has not got
    from ray import serve

    from shared.rpc.slomesh.v1 import replica_pb2

    out: list[dict[str, Any]] = []
    for name in names:
        try:
            handle = serve.get_app_handle(name)
            response = handle.Status.remote(replica_pb2.StatusQuery(), trace_headers={})
            st = await asyncio.wait_for(response, timeout_s)
        except Exception as err:
            out.append({"application": name, "error": status_of(err)})
            continue
        out.append(
            {
                "application": name,
                "engine": st.engine,
                "model": st.active_model,
                "waiting": st.waiting,
                "running": st.running,
                "kv_blocks": f"{st.kv_used_blocks}/{st.kv_total_blocks}",
            }
        )
    return out
