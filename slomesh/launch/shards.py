"""Scheduler shards in a mesh config (`slomesh up --shards N`; a shard added to or removed from a
running mesh: `slomesh shard add|remove NAME`, slomesh/cli/shards.py).

`with_shards` turns the config's one `scheduler` application into N shards, `scheduler`,
`scheduler-1`, ..., each with the same arguments (every replica: the live shards divide them,
services/scheduler/shard_peers.py) plus its name and its peers, and tells the ingress their
names (services/ingress/shard_router.py). A shard added later is one more such application; the
others learn of it at their next exchange and hand it its share of the replicas; the ingresses
learn of it from their shards' Health. A shard removed stops answering: its peers take its
replicas back and the ingresses send its requests to the next shard.
"""

from __future__ import annotations

import copy
from typing import Any

SCHEDULER = "scheduler"
"""The scheduler application's name in the shipped configs (the first shard keeps it)."""


def shard_names(count: int) -> list[str]:
    """The shards' application names: `scheduler`, `scheduler-1`, ..."""
    return [SCHEDULER if i == 0 else f"{SCHEDULER}-{i}" for i in range(count)]


def shard_app(base: dict[str, Any], name: str, peers: list[str]) -> dict[str, Any]:
    """The config entry of shard `name`: `base`'s (the scheduler entry) with its name and peers."""
    app = copy.deepcopy(base)
    app["name"] = name
    app["route_prefix"] = f"/{name}"
    args = app.setdefault("args", {})
    shard = dict(args.get("shard") or {})
    shard.update({"name": name, "peers": [p for p in peers if p != name]})
    args["shard"] = shard
    return app


def with_shards(config: dict[str, Any], count: int) -> dict[str, Any]:
    """`config` with its scheduler application split into `count` shards (module docstring);
    with 1, the one scheduler, but its ingress looks for shards added later."""
    if count < 1:
        raise ValueError(f"--shards must be at least 1, got {count}")
    out = copy.deepcopy(config)
    apps = out["applications"]
    base = next((a for a in apps if a["name"] == SCHEDULER), None)
    if base is None:
        raise ValueError(f"--shards: the config has no `{SCHEDULER}` application")
    names = shard_names(count)
    shards = [shard_app(base, n, names) for n in names]
    at = apps.index(base)
    out["applications"] = [*apps[:at], *shards, *apps[at + 1 :]]
    for app in out["applications"]:
        if app["name"] == "ingress":
            args = app.setdefault("args", {})
            routing = dict(args.get("scheduler") or {})
            routing.update({"shards": names, "discover": True})
            args["scheduler"] = routing
    return out
