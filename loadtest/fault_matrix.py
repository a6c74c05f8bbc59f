"""Fault matrix: under a steady streaming load, kill one replica of each service in turn and
report what in-flight and new requests got, and how long until every new request succeeds again.

Run against a running `slomesh up` (this script attaches to its Ray cluster to kill actors):

    .venv/bin/python loadtest/fault_matrix.py --rate 8 --seconds 24 --kill-at 8 \
        [--targets ingress,predictor,profiler,scheduler,deployer,replica-0,replica-1]

With scheduler shards (`slomesh up --shards 2`) a shard is a target by its application name
(`--targets scheduler-1`): the other shard's requests should see no error and the dead shard's
queued requests be admitted again by the other.

In flight = sent before the kill and not finished by it. Outcomes: done (a final chunk and
[DONE]), error-event (an OpenAI error chunk in the stream), cut (the stream ended with neither),
or the HTTP status / client error. Recovery = seconds from the kill to the first request after
which every request succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

DEPLOYMENTS = {
    "ingress": "IngressDeployment",
    "predictor": "PredictorDeployment",
    "profiler": "ProfilerDeployment",
    "scheduler": "SchedulerDeployment",
    "deployer": "DeployerDeployment",
}


@dataclass
class Result:
    start_s: float
    end_s: float
    outcome: str


async def _one(client: httpx.AsyncClient, model: str, t0: float) -> Result:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "tell me a story " * 8}],
        "max_tokens": random.choice([32, 64, 128]),
        "stream": True,
        "slo": "interactive",
    }
    start = time.time() - t0
    outcome = "cut"
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body, timeout=30.0) as r:
            if r.status_code != 200:
                outcome = f"http-{r.status_code}"
            else:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and '"error"' in line:
                        outcome = "error-event"
                    elif line.strip() == "data: [DONE]" and outcome == "cut":
                        outcome = "done"
    except httpx.HTTPError as err:
        outcome = f"client-{type(err).__name__}"
    return Result(start, time.time() - t0, outcome)


def _kill(target: str) -> str:
    import ray

    if target.startswith("replica-"):
        deployment = "ReplicaDeployment"
    elif target.startswith("scheduler"):  # a shard: scheduler, scheduler-1, ...
        deployment = "SchedulerDeployment"
    else:
        deployment = DEPLOYMENTS[target]
    prefix = f"SERVE_REPLICA::{target}#{deployment}#"
    names = [
        a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith(prefix)
    ]
    if not names:
        return "no live actor found"
    victim = sorted(names, key=lambda a: a["name"])[0]
    ray.kill(ray.get_actor(victim["name"], namespace=victim["namespace"]), no_restart=True)
    return f"killed {victim['name']}"


async def _run(target: str, args: argparse.Namespace) -> dict[str, Any]:
    results: list[Result] = []
    rng_wait = random.Random(0)
    async with httpx.AsyncClient(base_url=args.host, limits=httpx.Limits(max_connections=500)) as c:
        t0 = time.time()
        tasks: list[asyncio.Task[Result]] = []
        killed_at, note = None, ""
        next_s = 0.0
        while next_s < args.seconds:
            next_s += rng_wait.expovariate(args.rate)
            await asyncio.sleep(max(0.0, t0 + next_s - time.time()))
            if killed_at is None and next_s >= args.kill_at:
                killed_at = time.time() - t0
                note = await asyncio.get_running_loop().run_in_executor(None, _kill, target)
            tasks.append(asyncio.create_task(_one(c, args.model, t0)))
        results = list(await asyncio.gather(*tasks))
    assert killed_at is not None
    in_flight = [r for r in results if r.start_s < killed_at < r.end_s]
    new = sorted((r for r in results if r.start_s >= killed_at), key=lambda r: r.start_s)
    last_bad = max((r.start_s for r in new if r.outcome != "done"), default=None)
    recovery = 0.0 if last_bad is None else last_bad - killed_at
    return {
        "target": target,
        "kill": note,
        "in_flight": dict(Counter(r.outcome for r in in_flight)),
        "new": dict(Counter(r.outcome for r in new)),
        "recovery_s": round(recovery, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--host", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--rate", type=float, default=8.0, help="requests per second")
    ap.add_argument("--seconds", type=float, default=24.0, help="load per target")
    ap.add_argument("--kill-at", type=float, default=8.0, help="seconds into the load")
    ap.add_argument("--settle", type=float, default=20.0, help="pause between targets")
    ap.add_argument("--targets", default=",".join([*DEPLOYMENTS, "replica-0", "replica-1"]))
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument(
        "--node-ip",
        default="127.0.0.1",
        help="this machine's address in the mesh's Ray cluster (`slomesh up` runs a loopback "
        "node: 127.0.0.1); empty for Ray's own choice",
    )
    args = ap.parse_args()
    if args.node_ip == "127.0.0.1":  # attach to a loopback node (slomesh/launch/mesh.py)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    node = {"_node_ip_address": args.node_ip} if args.node_ip else {}
    ray.init(address="auto", logging_level="ERROR", log_to_driver=False, **node)
    rows = []
    print("| killed | in-flight requests got | new requests got | recovery s |")
    print("|---|---|---|---|")
    for target in args.targets.split(","):
        row = asyncio.run(_run(target, args))
        rows.append(row)
        print(f"| {target} | {row['in_flight']} | {row['new']} | {row['recovery_s']} |", flush=True)
        time.sleep(args.settle)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
