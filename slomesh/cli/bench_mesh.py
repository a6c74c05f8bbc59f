"""`slomesh bench-mesh`: what the live mesh costs, measured on loopback.

- overhead: TTFT through the whole mesh (HTTP -> ingress -> predictor -> scheduler -> replica,
  streaming; HTTP to the ingress replicas' own front door, or with `--door proxy` through
  Serve's HTTP proxy) minus TTFT of the same engine called in-process, and the cost of one gRPC hop
  through Serve's proxy (replica.Generate called directly);
- capacity: open-loop Poisson load at rising rates (aiohttp, `slomesh/bench/open_loop.py`, with
  an unmeasured warm-up per rate) against zero-step-time simulated replicas,
  p99 admission latency (time to first token with engines that take no time) per rate;
- memory (RSS of every Ray process) and start-up time of the mesh.
Engines are the simulated engine at zero step time, so what is measured is the mesh.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from slomesh.bench.open_loop import MESH_MODELS, MESH_PROMPT, ladder, percentiles_ms
from slomesh.cli.errors import UsageError
from slomesh.launch import mesh
from slomesh.launch.front_door import door_url


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("bench-mesh", help="mesh overhead, control-plane capacity, memory")
    p.add_argument("--requests", type=int, default=200, help="sequential requests per probe")
    p.add_argument("--rates", default="5,10,15", help='open-loop rates, requests/s ("": none)')
    p.add_argument("--seconds", type=float, default=8.0, help="duration of each rate step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--transport",
        choices=["handle", "grpc"],
        default="handle",
        help="how the ingress calls the other services",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="result file (default runs/bench-mesh.json); with --compare a folder for "
        "compare.json (default runs/compare)",
    )
    p.add_argument(
        "--compare",
        default=None,
        help="side by side with slomesh (the shipped config's replicas, through the ingress's "
        "front door) on the "
        "tiny vLLM model: any of bare-vllm,ray-serve-llm,slomesh-1 (slomesh with one replica, "
        "the peers' engine count),slomesh-proxy (slomesh through Serve's HTTP proxy),"
        "slomesh-no-priority (slomesh with vllm.engine_nice null: the engine's CPU priority off)",
    )
    p.add_argument(
        "--c8-seconds", type=float, default=30.0, help="--compare: concurrency-8 run, seconds"
    )
    p.add_argument(
        "--page",
        type=Path,
        default=None,
        help="--compare: also write the hot-path page (CPU per request per system and per "
        "process role) here, e.g. docs/results/hot-path.md",
    )
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="--compare --page: the --out folder of an earlier sitting (its compare-detail.json) "
        "shown beside this one",
    )
    p.add_argument(
        "--hot-path",
        choices=["fast", "no-leases", "no-direct", "full"],
        default="fast",
        help="the hot path: leases and direct replica streams (fast, the default), one "
        "of them off, or both off (full: Predict + Admit + a Serve handle stream per request)",
    )
    p.add_argument(
        "--door",
        choices=["front", "proxy"],
        default="front",
        help="where the client sends requests: the ingress replicas' own server (front, "
        "front_door.port 8100, the default) or Serve's HTTP proxy (proxy, port 8000)",
    )
    p.add_argument(
        "--engine",
        choices=["simulated", "vllm"],
        default="simulated",
        help="simulated at zero step time, or vLLM CPU with the tiny local model",
    )
    p.set_defaults(func=run)


SERVE_GRPC_PORT = 9000
"""Where the benchmark's mesh runs Serve's gRPC proxy."""


def _zero_time_config(
    transport: str, engine: str = "simulated", hot_path: str = "fast"
) -> dict[str, Any]:
    config = mesh.load_config(mesh.CONFIGS[engine])
    for app in config["applications"]:
        args = app.setdefault("args", {})
        if app["name"] == "scheduler" and hot_path in ("no-leases", "full"):
            args["leases"] = {"enabled": False}
        if app["name"].startswith("replica-") and hot_path in ("no-direct", "full"):
            args["grpc_host"] = ""
        if app["name"] == "ingress":
            args["transport"] = transport
            args["tracing"] = {"exporter": "none"}
        if app["name"].startswith("replica-"):
            args["step_time_scale"] = 0.0
            args["tracing"] = {"exporter": "none"}
        elif app["name"] == "scheduler":
            args["max_in_flight_per_replica"] = 4096
    # Serve's gRPC proxy, off by default, measures one gRPC hop (and carries transport "grpc")
    return mesh.with_serve_grpc_proxy(config, SERVE_GRPC_PORT)


async def _direct_engine_ttft(n: int) -> list[float]:
    from dataclasses import replace

    from services.replica.build import _scaled
    from services.replica.engine import EngineRequest
    from services.replica.sim_engine import AsyncSimEngine
    from shared.domain import SLO, Request, WallClock
    from shared.domain.engine import EngineConfig
    from shared.profiles.defaults import default_profile

    prof = _scaled(default_profile("A100-80GB", "llama-3.1-8b"), 0.0)
    eng = AsyncSimEngine("direct", {prof.model: prof}, EngineConfig(), WallClock(), prof.model)
    base = Request("x", prof.model, 4, 8, 0.0, SLO(20.0))
    out = []
    for i in range(n):
        t = time.perf_counter()
        async for _ in eng.generate(EngineRequest(replace(base, request_id=f"d{i}"))):
            out.append(time.perf_counter() - t)
            break
    await eng.shutdown()
    return out


async def _direct_vllm_ttft(n: int, config: dict[str, Any]) -> list[float]:
    """TTFT of the replica's own vLLM engine (same settings) called in-process."""
    from pathlib import Path

    from services.replica.engine import EngineRequest
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine
    from shared.domain import SLO, Request

    app = next(a for a in config["applications"] if a["name"] == "replica-0")
    settings = dict(app["args"]["vllm"])
    settings["model"] = str(Path(settings["model"]).expanduser())
    eng = VLLMEngine(VLLMEngineConfig.model_validate(settings))
    out = []
    try:
        for i in range(n + 5):
            req = Request(f"d{i}", "tiny-llama", 8, 8, time.time(), SLO(20.0))
            t = time.perf_counter()
            async for _ in eng.generate(EngineRequest(req, prompt=MESH_PROMPT)):
                if i >= 5:  # the first few warm the engine up
                    out.append(time.perf_counter() - t)
                break
    finally:
        await eng.shutdown()
    return out


async def _http_ttft(client: Any, url: str, model: str) -> float:
    body = {"model": model, "prompt": MESH_PROMPT, "max_tokens": 8, "stream": True}
    t = time.perf_counter()
    async with client.stream("POST", url, json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {await resp.aread()!r}")
        ttft = None
        async for line in resp.aiter_lines():  # read to the end: the request completes
            if ttft is None and line.startswith("data: {") and '"text":""' not in line:
                ttft = time.perf_counter() - t
    if ttft is None:
        raise RuntimeError("stream ended without output")
    return ttft


async def _grpc_hop_ttft(n: int, target: str, model: str) -> list[float]:
    import grpc

    from shared.rpc.mesh_auth import credential_metadata
    from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, replica_pb2_grpc

    out = []
    async with grpc.aio.insecure_channel(target) as ch:
        stub = replica_pb2_grpc.ReplicaStub(ch)  # type: ignore[no-untyped-call]
        for i in range(n):
            meta = common_pb2.RequestMeta(
                request_id=f"h{i}",
                model="llama-3.1-8b",
                input_tokens=4,
                max_tokens=8,
                slo=common_pb2.Slo(ttft_slo_ms=20000),
                arrival_unix_s=time.time(),
            )
            t = time.perf_counter()
            call = stub.Generate(
                replica_pb2.ReplicaGenerateRequest(meta=meta, prompt=MESH_PROMPT),
                metadata=[("application", "replica-0"), *credential_metadata()],
            )
            first = None
            async for chunk in call:  # the replica's empty accept marker is not a token
                if chunk.output_tokens:
                    first = first or time.perf_counter() - t
            out.append(first or float("nan"))
    return out


async def _capacity(
    url: str, rates: list[float], seconds: float, seed: int, model: str
) -> list[dict[str, Any]]:
    return await ladder(url, model, MESH_PROMPT, rates, seconds, seed)


def _ray_rss_mb() -> float:
    import psutil

    total = 0
    for p in psutil.process_iter(["name", "cmdline", "memory_info"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if "ray" in cmd.lower() and p.info["memory_info"] is not None:
            total += p.info["memory_info"].rss
    return total / 2**20


async def _probe(
    args: argparse.Namespace, http: str, grpc_target: str, direct: list[float]
) -> dict[str, Any]:
    import httpx

    model = MESH_MODELS[args.engine]
    url = f"{http}/completions"
    async with httpx.AsyncClient(timeout=30.0) as client:
        for _ in range(10):  # warm-up: connections, lazily created stubs
            await _http_ttft(client, url, model)
        mesh_ttft = [await _http_ttft(client, url, model) for _ in range(args.requests)]
    hop = await _grpc_hop_ttft(args.requests, grpc_target, model)
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    capacity = await _capacity(url, rates, args.seconds, args.seed, model)
    ok = [s["rate_rps"] for s in capacity if s["p99_ms"] <= 50.0 and s["errors"] == 0]
    d, m = percentiles_ms(direct), percentiles_ms(mesh_ttft)
    return {
        "direct_engine_ttft": d,
        "mesh_ttft": m,
        "mesh_added_ttft_ms": {"p50": m["p50_ms"] - d["p50_ms"], "p99": m["p99_ms"] - d["p99_ms"]},
        "one_grpc_hop_ttft": percentiles_ms(hop),
        "capacity": capacity,
        "max_rate_p99_under_50ms_rps": max(ok, default=0.0),
    }


def _api_url(config: dict[str, Any], door: str) -> str:
    """The OpenAI base URL the client uses: the front door or Serve's proxy."""
    http, _ = mesh.endpoints(config)
    if door == "proxy":
        return http
    url = door_url(config)
    if url is None:
        raise UsageError("--door front: the config's ingress has front_door disabled")
    return url


def _admission_capacity(args: argparse.Namespace) -> float | None:
    """The highest --rates step with p99 admission <= 50 ms and no errors, zero-time
    simulated engines (what `admission_capacity_rps` of compare.json reports)."""
    config = _zero_time_config(args.transport, "simulated", args.hot_path)
    mesh.start(config)
    try:
        http = _api_url(config, args.door)
        rates = [float(r) for r in args.rates.split(",") if r.strip()]
        steps = asyncio.run(
            _capacity(
                f"{http}/completions", rates, args.seconds, args.seed, MESH_MODELS["simulated"]
            )
        )
    finally:
        mesh.stop()
    ok = [s["rate_rps"] for s in steps if s["p99_ms"] <= 50.0 and s["errors"] == 0]
    return max(ok, default=0.0)


def run(args: argparse.Namespace) -> int:
    if args.compare is not None:
        from slomesh.cli.bench_compare import run_compare

        try:
            return run_compare(args, lambda: _admission_capacity(args))
        except ValueError as err:
            raise UsageError(str(err)) from None
    args.out = args.out or Path("runs/bench-mesh.json")
    config = _zero_time_config(args.transport, args.engine, args.hot_path)
    if args.engine == "vllm":
        from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir

        build_tiny_model(default_tiny_model_dir())
        direct = asyncio.run(_direct_vllm_ttft(args.requests, config))
    else:
        direct = asyncio.run(_direct_engine_ttft(args.requests))
    started = mesh.start(config)
    try:
        grpc_target = f"127.0.0.1:{SERVE_GRPC_PORT}"  # Serve's gRPC proxy: a Replica hop
        http = _api_url(config, args.door)
        result = asyncio.run(_probe(args, http, grpc_target, direct))
        result["door"] = args.door
        result["transport"] = args.transport
        result["hot_path"] = args.hot_path
        result["engine"] = args.engine
        result["startup_s"] = started
        result["ray_rss_mb"] = _ray_rss_mb()
    finally:
        mesh.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "capacity"}, indent=2))
    print(f"wrote {args.out}")
    return 0
