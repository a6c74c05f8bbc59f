"""`slomesh profile-adapters`: LoRA adapter load time on the real vLLM engine.

Starts vLLM (the CPU build here) on the tiny local model with LoRA on and one adapter slot,
builds random-weight adapters locally (`build_tiny_adapter`), and sends requests that cycle
through them through the replica's own serving path (vLLM's OpenAI application with
`AdapterSlots`), so every request loads its adapter and unloads the previous one, exactly as a
replica does. It records each load's duration (vLLM's `load_lora_adapter`: read, validate,
engine `add_lora`) and the first-token latency of one-token requests on the base model, on an
adapter already loaded and on one that must be loaded, and writes them as JSON and a page
(docs/results/adapters.md). The simulator's `adapter_load_s` and the placer's `load_s` are
set from it. Run it alone: it starts an engine (under the live lock on a shared machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_JSON = Path("docs/results/adapters.json")
DEFAULT_PAGE = Path("docs/results/adapters.md")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profile-adapters", help="measure LoRA adapter load time on vLLM (CPU)")
    p.add_argument("--adapters", type=int, default=4, help="adapters to cycle through (>= 2)")
    p.add_argument("--rank", type=int, default=8, choices=[8, 16, 32, 64], help="LoRA rank")
    p.add_argument("--loads", type=int, default=16, help="adapter loads to time (>= 2)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="figures (JSON)")
    p.add_argument("--page", type=Path, default=DEFAULT_PAGE, help="the results page")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from slomesh.cli.errors import UsageError

    if args.adapters < 2 or args.loads < 2:
        raise UsageError("--adapters and --loads must be >= 2 (each request loads an adapter)")
    figures = asyncio.run(_measure(args.adapters, args.rank, args.loads))
    figures["command"] = "slomesh " + " ".join(sys.argv[1:])
    figures["load_average"] = list(os.getloadavg())
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    args.page.write_text(render(figures))
    load = figures["adapter_load_s"]
    print(f"adapter load: median {load['median'] * 1e3:.1f} ms, p90 {load['p90'] * 1e3:.1f} ms")
    print(f"wrote {args.json} and {args.page}")
    return 0


async def _measure(n: int, rank: int, loads: int) -> dict[str, Any]:
    from services.replica.adapters import ReplicaAdapters
    from services.replica.openai_serving import vllm_serving
    from services.replica.vllm.config import VLLMEngineConfig
    from services.replica.vllm.engine import VLLMEngine
    from services.replica.vllm.openai_app import ServingOptions
    from services.replica.vllm.tiny_adapter import build_tiny_adapter
    from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir
    from shared.domain.adapter import AdapterSpec

    base = build_tiny_model(default_tiny_model_dir())
    root = base.parent / "adapters"
    specs = [
        AdapterSpec(
            name=f"tiny-lora-{i}",
            path=str(build_tiny_adapter(root / f"tiny-lora-{i}", base, rank=rank, seed=i)),
            rank=rank,
        )
        for i in range(n)
    ]
    adapters = ReplicaAdapters(specs=specs, slots=1, max_lora_rank=rank)
    config = VLLMEngineConfig(
        model=str(base),
        served_model_name="tiny-llama",
        dtype="float32",
        max_model_len=2048,
        kv_cache_memory_bytes=64 << 20,
        **adapters.engine_settings(),
    )
    engine = VLLMEngine(config)
    try:
        serving = await vllm_serving(engine, "tiny-llama", ServingOptions(), adapters)
        await _first_token_s(serving, "tiny-llama", None, "warm")
        base_s = [await _first_token_s(serving, "tiny-llama", None, f"b{k}") for k in range(5)]
        cold_s = []
        for k in range(loads):
            name = specs[k % n].name
            cold_s.append(await _first_token_s(serving, name, name, f"c{k}"))
        loaded = specs[(loads - 1) % n].name
        warm_s = [await _first_token_s(serving, loaded, loaded, f"w{k}") for k in range(5)]
        assert serving.adapters is not None
        times = list(serving.adapters.load_times_s)
        import vllm
    finally:
        await engine.shutdown()
    return {
        "engine": f"vLLM {vllm.__version__} (CPU build), tiny-llama (random weights)",
        "adapters": n,
        "rank": rank,
        "slots": 1,
        "adapter_load_s": _stats(times),
        "first_token_s": {
            "base_model": _stats(base_s),
            "adapter_loaded": _stats(warm_s),
            "adapter_loaded_on_demand": _stats(cold_s),
        },
    }


async def _first_token_s(serving: Any, model: str, adapter: str | None, rid: str) -> float:
    from shared.domain import SLO, Request
    from shared.rpc.slomesh.v1 import replica_pb2

    body = {"model": model, "prompt": "Hello world, the model", "max_tokens": 1, "temperature": 0}
    http = replica_pb2.HttpCall(
        method="POST", path="/v1/completions", body=json.dumps(body).encode()
    )
    http.headers.add(name="content-type", value="application/json")
    request = Request(rid, "tiny-llama", 8, 1, time.time(), SLO(60.0), adapter=adapter)
    start = time.perf_counter()
    async for chunk in serving.serve(request, http):
        if chunk.http_status and chunk.http_status != 200:
            raise RuntimeError(f"{model}: HTTP {chunk.http_status}: {chunk.body!r}")
    return time.perf_counter() - start


def _stats(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "mean": statistics.fmean(ordered),
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "min": ordered[0],
        "max": ordered[-1],
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def render(figures: dict[str, Any]) -> str:
    """The results page of `figures` (generated; never edited by hand)."""
    load = figures["adapter_load_s"]
    rows = [
        f"| adapter load (vLLM `load_lora_adapter`) | {load['n']} | {ms(load['median'])} | "
        f"{ms(load['p90'])} | {ms(load['min'])} | {ms(load['max'])} |"
    ]
    for key, label in (
        ("base_model", "one-token request, base model"),
        ("adapter_loaded", "one-token request, adapter loaded"),
        ("adapter_loaded_on_demand", "one-token request, adapter loaded on demand"),
    ):
        s = figures["first_token_s"][key]
        rows.append(
            f"| {label} | {s['n']} | {ms(s['median'])} | {ms(s['p90'])} | {ms(s['min'])} | "
            f"{ms(s['max'])} |"
        )
    avg = ", ".join(f"{x:.1f}" for x in figures["load_average"])
    return "\n".join(
        [
            "# LoRA adapter load time",
            "",
            "Generated by `slomesh profile-adapters` (slomesh/cli/profile_adapters.py); do not "
            "edit by hand.",
            "",
            f"{figures['engine']}; {figures['adapters']} random-weight adapters of rank "
            f"{figures['rank']} (`slomesh build-tiny-adapter`), {figures['slots']} adapter slot, "
            "so each request for another adapter unloads one and loads its own through the "
            "replica's serving path (vLLM's runtime LoRA loading). Command: "
            f"`{figures['command']}`; load average when it ended: {avg}.",
            "",
            "| what | n | median ms | p90 ms | min ms | max ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
        ]
    )
