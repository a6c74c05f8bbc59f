"""Disconnects and replica failures in the live mesh."""

from __future__ import annotations

import time
from typing import Any

import httpx
import ray

from tests.integration.handles import engine_load

MODEL = "llama-3.1-8b"


def _running() -> int:
    return engine_load(("replica-0", "replica-1"))


def _wait_idle(timeout_s: float = 20.0) -> int:
    deadline = time.time() + timeout_s
    busy = _running()
    while busy and time.time() < deadline:
        time.sleep(0.2)
        busy = _running()
    return busy


def test_mesh_disconnect_mid_stream_frees_the_engine_slot(live_mesh: dict[str, Any]) -> None:
    assert _wait_idle() == 0
    body = {"model": MODEL, "prompt": "long", "max_tokens": 5000, "stream": True}
    with httpx.stream("POST", f"{live_mesh['http']}/completions", json=body, timeout=30) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(3)]
        assert any(line.startswith("data: {") for line in got)
        assert _running() >= 1  # generating while we hold the stream
    # the client went away: the engine must drop the request long before 5000 tokens
    assert _wait_idle(15.0) == 0


def test_mesh_replica_killed_mid_stream_is_a_clear_error(live_mesh: dict[str, Any]) -> None:
    url = f"{live_mesh['http']}/completions"
    body = {"model": MODEL, "prompt": "doomed", "max_tokens": 5000, "stream": True}
    events: list[str] = []
    with httpx.stream("POST", url, json=body, timeout=60) as r:
        lines = r.iter_lines()
        events.append(next(lines))
        for app in ("replica-0", "replica-1"):  # kill whichever replica serves it: both
            actor = next(
                a
                for a in ray.util.list_named_actors(all_namespaces=True)
                if a["name"].startswith(f"SERVE_REPLICA::{app}#")
            )
            ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)
        events.extend(lines)
    assert any('"error"' in e and "failed mid-request" in e for e in events), events[-3:]
    assert events[-1] == "data: [DONE]" or events[-2] == "data: [DONE]"
    # Serve replaces the dead replicas; the mesh serves again
    deadline = time.time() + 90
    status = 0
    while time.time() < deadline:
        r2 = httpx.post(url, json={"model": MODEL, "prompt": "again", "max_tokens": 2}, timeout=30)
        status = r2.status_code
        if status == 200:
            break
        assert status in (503, 500), r2.text  # a clear error while replicas restart, no hang
        time.sleep(1.0)
    assert status == 200
