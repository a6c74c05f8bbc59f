"""Whether a started mesh serves (`slomesh up` and every bench say it is up only after it
does): every replica the scheduler lists counted ready by the scheduler's Health, then one real
completion per model a replica starts on through the OpenAI endpoint clients use.

Every replica first: a request placed before a replica has answered the scheduler's first Status
probe goes to the others, and a static placement pins its model to the replicas it saw then.
Only the models the replicas start on: on a mesh whose replicas swap models, a completion for
any other model sets off a swap before the first client request comes.

Each model gets a one-token completion, sent again while the mesh answers that it is not ready
(503, 429, a failed replica, a connection refused) until the model's first success or the
deadline; a refusal that waiting cannot cure (401, 403, 400, 404) ends the wait at once. The
error names the model, the endpoint and the mesh's last answer (which names the replica when
one failed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from slomesh.launch.front_door import INGRESS_IMPORT_PATH
from slomesh.launch.shards import SCHEDULER

READY_TIMEOUT_S = 300.0
"""How long `slomesh up` waits for every replica and each start model's first completion (a vLLM
replica's first request includes its warm-up), seconds."""
PROBE_PROMPT = "Hello"
RETRYABLE = frozenset({429, 500, 502, 503, 504})
"""Answers of a mesh that is still starting (or a replica still warming up)."""


class MeshNotReady(RuntimeError):
    """A model served no completion within the readiness deadline."""


def ingress_models(config: dict[str, Any]) -> list[str]:
    """The models the mesh config's ingress serves, in its order."""
    for app in config.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            return [str(m["name"]) for m in (app.get("args") or {}).get("models", [])]
    return []


def _scheduler_app(config: dict[str, Any]) -> dict[str, Any] | None:
    return next((a for a in config.get("applications", []) if a.get("name") == SCHEDULER), None)


def _scheduled_replicas(config: dict[str, Any]) -> list[dict[str, Any]]:
    app = _scheduler_app(config)
    reps = ((app or {}).get("args") or {}).get("replicas") or []
    return [r for r in reps if isinstance(r, dict) and r.get("model")]


def scheduler_apps(config: dict[str, Any]) -> list[str]:
    """The scheduler's applications: `scheduler` and its shards (slomesh/launch/shards.py), in
    the config's order; [] without one."""
    first = _scheduler_app(config)
    if first is None:
        return []
    path = first.get("import_path")
    return [str(a["name"]) for a in config["applications"] if a.get("import_path") == path]


def replicas_by_start_model(config: dict[str, Any]) -> dict[str, int]:
    """How many of the scheduler's replicas start on each model (what its Health counts as
    ready replicas per model once each has answered a Status probe)."""
    out: dict[str, int] = {}
    for r in _scheduled_replicas(config):
        out[str(r["model"])] = out.get(str(r["model"]), 0) + 1
    return out


def wait_for_replicas(
    ready: Callable[[], dict[str, int]],
    expected: dict[str, int],
    timeout_s: float = READY_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll `ready()` (the scheduler's ready replicas per model: its Health) until each model
    has its `expected` count; MeshNotReady naming the models short of it after `timeout_s`, and
    the error of the last poll when it raised (a poll that raises counts as no replica ready).
    Until a replica has answered the scheduler's first Status probe nothing is placed there: a
    request sent before then is placed on the others (a static placement pins a model to the
    replicas it saw then, where the simulator sees every replica from the start)."""
    deadline = clock() + timeout_s
    failed = ""
    while True:
        try:
            have, failed = ready(), ""
        except Exception as err:  # the scheduler not answering yet: asked again
            have, failed = {}, f"{type(err).__name__}: {err}"
        short = {m: n for m, n in expected.items() if have.get(m, 0) < n}
        if not short:
            return
        if clock() >= deadline:
            said = ", ".join(f"{m} {have.get(m, 0)}/{n}" for m, n in sorted(short.items()))
            why = f" (the last poll failed: {failed})" if failed else ""
            raise MeshNotReady(f"replicas not ready after {timeout_s:.0f} s: {said}{why}")
        sleep(0.2)


def start_models(config: dict[str, Any]) -> list[str]:
    """The ingress's models that a replica starts on (the scheduler's replica list), in the
    ingress's order; every model of the ingress where the scheduler lists no replica (module
    docstring: why no other)."""
    models = ingress_models(config)
    starts = replicas_by_start_model(config)
    return [m for m in models if m in starts] or models


def probe_key(config: dict[str, Any]) -> str | None:
    """The API key the probe sends: none while the ingress serves anonymous callers, else its
    first configured key (with required keys, an anonymous probe would get 401)."""
    for app in config.get("applications", []):
        if app.get("import_path") == INGRESS_IMPORT_PATH:
            keys = (app.get("args") or {}).get("api_keys") or {}
            if keys.get("required") and keys.get("keys"):
                return str(next(iter(keys["keys"])))
    return None


def _describe(response: httpx.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:300]
    drop = response.headers.get("x-slomesh-drop-reason")
    return f"{response.status_code} {message}" + (f" ({drop})" if drop else "")


def _retry_after_s(response: httpx.Response) -> float:
    try:
        return float(response.headers.get("retry-after", "0.5"))
    except ValueError:
        return 0.5


def wait_until_serving(
    base_url: str,
    models: list[str],
    api_key: str | None = None,
    timeout_s: float = READY_TIMEOUT_S,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, float]:
    """Send one completion (max_tokens 1) per model to `base_url` (an OpenAI base URL ending in
    /v1) until each has succeeded; returns the seconds each model took. Raises MeshNotReady
    naming the model and the last answer when the deadline passes first, or at once on an
    answer waiting cannot change."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    http = client or httpx.Client(timeout=60.0)
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    took: dict[str, float] = {}
    try:
        for model in models:
            last = "no answer yet"
            body = {"model": model, "prompt": PROBE_PROMPT, "max_tokens": 1}
            while True:
                wait = 0.5
                try:
                    response = http.post(f"{base_url}/completions", json=body, headers=headers)
                    if response.status_code == 200:
                        took[model] = time.monotonic() - t0
                        break
                    last = _describe(response)
                    if response.status_code not in RETRYABLE:
                        raise MeshNotReady(
                            f"model '{model}' refused its first completion at {base_url}: {last}"
                        )
                    wait = min(max(_retry_after_s(response), 0.2), 2.0)
                except httpx.HTTPError as err:
                    last = f"{type(err).__name__}: {err}"
                if time.monotonic() + wait > deadline:
                    raise MeshNotReady(
                        f"model '{model}' served no completion at {base_url} within "
                        f"{timeout_s:.0f} s (--ready-timeout-s); the mesh's last answer: {last}"
                    )
                sleep(wait)
    finally:
        if client is None:
            http.close()
    return took


def wait_until_ready(
    config: dict[str, Any],
    base_url: str,
    ready: Callable[[], dict[str, int]],
    timeout_s: float = READY_TIMEOUT_S,
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, float]:
    """The mesh of `config` is ready (module docstring): `ready()` (the scheduler's ready replicas
    per model) counts every replica the scheduler lists, then each start model has served a
    completion at `base_url` (its OpenAI endpoint), all within `timeout_s`; returns the seconds
    each start model's completion took. Raises MeshNotReady naming what is short."""
    deadline = clock() + timeout_s
    wait_for_replicas(ready, replicas_by_start_model(config), timeout_s, sleep, clock)
    left = max(deadline - clock(), 0.0)
    key = probe_key(config)
    return wait_until_serving(base_url, start_models(config), key, left, client, sleep)
