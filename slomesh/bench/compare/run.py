"""`bench-mesh --compare`: bare vLLM, Ray Serve LLM and slomesh, one after another in one
sitting, on the same tiny local model and engine arguments, measured by the same client.

Per system: start-up (launch to the first answered chat completion), warm-up, the CPU its
processes spend outside vLLM's engine core while no request comes (`idle_seconds`), first-token
latency at max_tokens=1, total latency at 16 tokens, a max_tokens sweep (decode per token is its
slope), then 8 closed-loop streams for `c8_seconds` with the CPU its processes spend outside
vLLM's engine core. slomesh's spans (its own trace file, sampled as the mesh samples them) are
split into the unloaded probes and the concurrency-8 run; its admissions in those two phases
come from its schedulers' counters, read before and after each (admission_paths.py). A system
that cannot start is reported with its reason; the rest go on.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from slomesh.bench.compare import admission_paths, load
from slomesh.bench.compare.admission_paths import difference
from slomesh.bench.compare.cpu import tree_cpu
from slomesh.bench.compare.stats import SYSTEM_NAMES, SystemResult
from slomesh.bench.compare.systems import (
    NotStarted,
    Running,
    SystemSpec,
    bare_vllm_spec,
    engine_kwargs,
    launch,
    ray_serve_llm_spec,
    slomesh_spec,
    stop,
)


@dataclass(frozen=True)
class Plan:
    """How much to measure (the same for every system)."""

    first_token_requests: int = 100
    total16_requests: int = 40
    sweep_max_tokens: tuple[int, ...] = (1, 8, 16, 32, 64)
    sweep_requests: int = 8
    c8_max_tokens: int = 32
    c8_seconds: float = 30.0
    warmup_requests: int = 10
    idle_seconds: float = 10.0
    """After the warm-up, how long the system is left without requests while the CPU its
    processes spend outside vLLM's engine core is measured (its fixed cost per second)."""


def parse_systems(text: str) -> list[str]:
    """The --compare list plus slomesh (always measured, last), in a fixed order; unknown
    names fail listing the valid ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEM_NAMES]
    if unknown:
        raise ValueError(
            f"--compare: unknown system(s) {', '.join(unknown)}; valid: {', '.join(SYSTEM_NAMES)}"
        )
    return [n for n in SYSTEM_NAMES if n in names or n == "slomesh"]


def slomesh_config(config: dict[str, Any], traces: Path, engines: int = 0) -> dict[str, Any]:
    """The default vLLM mesh config with every service's spans in `traces`; `engines` > 0
    keeps only the first `engines` replicas (their applications and the scheduler's list)."""
    out = copy.deepcopy(config)
    if engines > 0:
        names = [a["name"] for a in out["applications"] if a["name"].startswith("replica-")]
        dropped = set(names[engines:])
        out["applications"] = [a for a in out["applications"] if a["name"] not in dropped]
        for app in out["applications"]:
            listed = app.get("args", {}).get("replicas")
            if isinstance(listed, list):
                app["args"]["replicas"] = [r for r in listed if r["application"] not in dropped]
    for app in out["applications"]:
        args = app.setdefault("args", {})
        args["tracing"] = {"exporter": "file", "file_path": str(traces)}
    return out


NO_PRIORITY: dict[str, Any] = {"engine_nice": None, "engine_cpus": None, "mesh_sched_policy": None}
"""The `vllm` settings that leave an engine with the mesh's CPU priority and every CPU."""


def without_engine_priority(config: dict[str, Any]) -> dict[str, Any]:
    """`config` with every vLLM replica's engine left at the mesh's CPU priority, unpinned
    and beside a control plane of the default class (`NO_PRIORITY`): what the engine's CPU
    treatment is worth, measured beside it."""
    return with_engine_settings(config, NO_PRIORITY)


def with_engine_settings(config: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """`config` with `settings` over every vLLM replica's `vllm` fields (the input is kept)."""
    out = copy.deepcopy(config)
    for app in out["applications"]:
        vllm = app.get("args", {}).get("vllm")
        if isinstance(vllm, dict):
            vllm.update(copy.deepcopy(settings))
    return out


VARIANTS: dict[str, Callable[[], dict[str, Any]]] = {
    "nice-5": lambda: {"engine_nice": -5},
    "nice-15": lambda: {"engine_nice": -15},
    "nice-20": lambda: {"engine_nice": -20},
    "batch": lambda: {"mesh_sched_policy": "batch"},
    "idle": lambda: {"mesh_sched_policy": "idle"},
    "pin": lambda: {"engine_cpus": [max(os.sched_getaffinity(0))]},
    "nopin": lambda: {"engine_cpus": None},
    "helpers-any": lambda: {"engine_helpers": "any"},
    "helpers-rest": lambda: {"engine_helpers": "rest"},
    "helpers-engine": lambda: {"engine_helpers": "engine"},
    "rt": lambda: {"engine_realtime": True},
    "nort": lambda: {"engine_realtime": False},
    "nostats": lambda: {"engine_stats": False},
    "stats": lambda: {"engine_stats": True},
}
"""Engine CPU settings a system name `slomesh+A+B` applies over the shipped config, in order:
engine nice values, the control plane's scheduling class, the engine pinned to this process's
highest CPU and the control plane kept off it, or no engine pinned, where a pinned engine's
helper threads run, and its model thread in the real-time class or not."""


def variant_settings(name: str) -> dict[str, Any] | None:
    """The `vllm` settings of a system named `slomesh+A+B...` (each part a `VARIANTS` key),
    None for any other name; an unknown part fails naming the valid ones."""
    base, *parts = name.split("+")
    if base != "slomesh" or not parts:
        return None
    unknown = [p for p in parts if p not in VARIANTS]
    if unknown:
        raise ValueError(
            f"unknown variant(s) {', '.join(unknown)} in {name!r}; valid: {', '.join(VARIANTS)}"
        )
    settings: dict[str, Any] = {}
    for part in parts:
        settings.update(VARIANTS[part]())
    return settings


async def measure(
    spec: SystemSpec, running: Running, plan: Plan, result: SystemResult
) -> dict[str, tuple[float, float]]:
    """Fill `result` with the client-side figures; returns the phases' unix-time windows."""
    client = load.client_for(spec.base_url)
    windows: dict[str, tuple[float, float]] = {}
    try:
        await load.sequential(client, spec.model, 16, plan.warmup_requests)
        if plan.idle_seconds > 0:
            before = tree_cpu(running.proc.pid)
            t0 = time.monotonic()
            await asyncio.sleep(plan.idle_seconds)
            idle = tree_cpu(running.proc.pid).minus(before)
            result.idle_seconds = time.monotonic() - t0
            result.idle_cpu_outside_engine_s = idle.outside_s
            result.idle_cpu_by_process_s = {
                k: round(v, 3) for k, v in idle.by_process.items() if v > 0
            }
        marks = PhaseCounters(spec, result)
        marks.start()
        t = time.time()
        first = await load.sequential(client, spec.model, 1, plan.first_token_requests)
        windows["unloaded max_tokens=1"] = (t, time.time())
        marks.end("unloaded max_tokens=1")
        result.first_token_s = [s.first_s for s in first]
        total = await load.sequential(client, spec.model, 16, plan.total16_requests)
        result.total16_s = [s.total_s for s in total]
        for n in plan.sweep_max_tokens:
            runs = await load.sequential(client, spec.model, n, plan.sweep_requests)
            result.sweep_s[n] = [s.total_s for s in runs]
        marks.start()
        before = tree_cpu(running.proc.pid)
        t = time.time()
        req, tok, err, took = await load.concurrent(
            client, spec.model, plan.c8_max_tokens, 8, plan.c8_seconds
        )
        windows["concurrency 8"] = (t, time.time())
        used = tree_cpu(running.proc.pid).minus(before)
        result.c8_requests, result.c8_tokens, result.c8_errors = req, tok, err
        result.c8_seconds = took
        result.cpu_outside_engine_s = used.outside_s
        result.cpu_by_process_s = {k: round(v, 3) for k, v in used.by_process.items() if v > 0}
        marks.end("concurrency 8")
    finally:
        await client.close()
    return windows


class PhaseCounters:
    """The system's admission counters read around a phase (outside its CPU window); the
    difference goes to `result.admissions[phase]`."""

    def __init__(self, spec: SystemSpec, result: SystemResult) -> None:
        self._read = spec.counters
        self._result = result
        self._before: dict[str, Any] | None = None

    def start(self) -> None:
        self._before = self._read() if self._read is not None else None

    def end(self, phase: str) -> None:
        after = self._read() if self._read is not None else None
        if self._before is not None and after is not None:
            self._result.admissions[phase] = difference(after, self._before)


def run_system(
    spec: SystemSpec,
    plan: Plan,
    log_dir: Path,
    report: Callable[[str], None] = print,
    launcher: Callable[..., Running] = launch,
) -> tuple[SystemResult, dict[str, tuple[float, float]]]:
    """Start, measure and stop one system; a system that cannot start or fails is returned
    with ran=False and the reason (also reported), never raised."""
    result = SystemResult(spec.name, spec.engines)
    report(f"== {spec.name}: starting")
    try:
        running = launcher(spec, log_dir, lambda s: load.answers(s.base_url, s.model))
    except NotStarted as err:
        result.why_not = str(err)
        report(f"== {spec.name}: cannot run: {err}")
        return result, {}
    result.startup_s = running.startup_s
    report(f"== {spec.name}: up in {running.startup_s:.1f} s, measuring")
    try:
        windows = asyncio.run(measure(spec, running, plan, result))
        result.ran = True
    except Exception as exc:
        result.why_not = f"failed while measured: {exc!r}"
        report(f"== {spec.name}: {result.why_not}\n{traceback.format_exc(limit=3)}")
        windows = {}
    finally:
        stop(running)
    return result, windows


def specs(names: list[str], out_dir: Path, ports: dict[str, int]) -> list[SystemSpec]:
    import yaml

    from services.replica.vllm.tiny_model import build_tiny_model, default_tiny_model_dir
    from slomesh.launch import mesh

    build_tiny_model(default_tiny_model_dir())
    config = mesh.load_config(mesh.CONFIGS["vllm"])
    replicas = [a for a in config["applications"] if a["name"].startswith("replica-")]
    model = replicas[0]["args"]["model"]
    kwargs = engine_kwargs(replicas[0]["args"]["vllm"])
    # as in slomesh's replicas: multiprocessing off, and one OpenMP thread (Ray gives its 1-CPU
    # actors OMP_NUM_THREADS=1; with one thread per core vLLM's spinning OpenMP workers thrash
    # on a busy 2-core machine: 138 ms/token measured under load average 20)
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
    proxy, _ = mesh.endpoints(config)
    front = mesh.openai_url(config)  # the ingress replicas' own door

    def slomesh(
        name: str, engines: int, http: str = front, settings: dict[str, Any] | None = None
    ) -> SystemSpec:
        traces = (out_dir / f"traces-{name}.jsonl").resolve()
        traces.unlink(missing_ok=True)
        cfg_path = out_dir / f"{name}.yaml"
        cfg = slomesh_config(config, traces, engines)
        if settings:
            cfg = with_engine_settings(cfg, settings)
        cfg_path.write_text(yaml.safe_dump(cfg))
        spec = slomesh_spec(cfg_path, [mesh.DEFAULT_PROFILES["vllm"]], engines, http, model)
        return replace(spec, name=name, counters=partial(admission_paths.read, cfg_path))

    made = {
        "bare-vllm": lambda: bare_vllm_spec(kwargs, model, ports["bare-vllm"], env),
        "ray-serve-llm": lambda: ray_serve_llm_spec(kwargs, model, ports["ray-serve-llm"], env),
        "slomesh-1": lambda: slomesh("slomesh-1", 1),
        "slomesh-proxy": lambda: slomesh("slomesh-proxy", len(replicas), proxy),
        "slomesh": lambda: slomesh("slomesh", len(replicas)),
        "slomesh-no-priority": lambda: slomesh(
            "slomesh-no-priority", len(replicas), front, NO_PRIORITY
        ),
    }
    out = []
    for n in names:
        settings = variant_settings(n)
        out.append(made[n]() if settings is None else slomesh(n, len(replicas), front, settings))
    return out


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"
