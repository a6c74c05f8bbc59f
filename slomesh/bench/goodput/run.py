"""`slomesh bench-goodput`: vLLM's own serving benchmark against bare vLLM and slomesh.

The systems are those of `bench-mesh --compare` (`slomesh.bench.compare.run.specs`: the same
tiny model and engine arguments, each started as a process group of its own, one after another
in one sitting), plus any already running system given by URL. Against each, one harness process
(`slomesh.bench.goodput.harness`) runs `vllm.benchmarks.serve` over the ladder of rates: random
dataset, fixed input and output lengths, `--ignore-eos`, `--goodput ttft:T tpot:P`, and the same
objectives as the headers `x-slo-ttft-ms` / `x-slo-tpot-ms` (vLLM's `--header`; sent to every
system alike, bare vLLM ignores them). A system that cannot start, or whose harness fails, is
reported with its reason and the rest go on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slomesh.bench.compare.cpu import CpuSplit, tree_cpu
from slomesh.bench.compare.load import answers
from slomesh.bench.compare.systems import NotStarted, Running, SystemSpec, launch, stop
from slomesh.bench.goodput.cpu_rates import CpuSampler, Sampling, cpu_by_rate
from slomesh.bench.goodput.harness import rate_windows, result_name
from slomesh.bench.goodput.results import Step, step_from_result


@dataclass(frozen=True)
class Plan:
    """What every system is measured with."""

    rates: tuple[float, ...]
    """Offered loads, requests/s (Poisson arrivals)."""
    seconds: float = 20.0
    """Arrivals per rate, seconds (rate * seconds requests)."""
    input_len: int = 128
    """Prompt tokens per request (vLLM's random dataset)."""
    output_len: int = 256
    """Output tokens per request (with --ignore-eos every request generates them all)."""
    slo_ttft_ms: float = 1000.0
    """TTFT objective, ms: vLLM's --goodput ttft and the x-slo-ttft-ms header."""
    slo_tpot_ms: float = 50.0
    """TPOT objective, ms: vLLM's --goodput tpot and the x-slo-tpot-ms header."""
    slo_headers: bool = True
    """Send the objectives as headers (False: slomesh resolves its default class)."""
    warmups: int = 4
    """Warm-up requests before the first rate (not measured)."""
    seed: int = 0
    """Seed of vLLM's random dataset (the same prompts for every system)."""
    client_nice: int = -10
    """CPU priority change of the benchmark's client process (the same for every system; a
    negative value needs the privilege, and without it the client runs as it is)."""


@dataclass
class SystemRun:
    """One system's ladder."""

    name: str
    engines: int
    base_url: str
    startup_s: float | None = None
    why_not: str | None = None
    steps: list[Step] = field(default_factory=list)
    cpu_engine_s: float | None = None
    """CPU seconds vLLM's engine-core processes spent over the ladder (started systems)."""
    cpu_outside_s: float | None = None
    """CPU seconds the system's other processes spent over the ladder (for slomesh: the
    control plane, Ray, and the replicas' vLLM front ends)."""
    cpu_by_rate: list[dict[str, Any]] = field(default_factory=list)
    """Per rate: the engine and outside cores busy during its run (cpu_rates.py)."""
    load_average: tuple[str, str] | None = None
    """The host's load averages (1, 5, 15 min) when its benchmark started and ended."""


def harness_command(
    plan: Plan, base_url: str, model: str, tokenizer: str, result_dir: Path
) -> list[str]:
    """The harness process for one system (`base_url` is the OpenAI base, ending in /v1)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    cmd = [
        sys.executable,
        "-m",
        "slomesh.bench.goodput.harness",
        "--rates",
        ",".join(f"{r:g}" for r in plan.rates),
        "--seconds",
        f"{plan.seconds:g}",
        "--result-dir",
        str(result_dir),
        "--nice",
        str(plan.client_nice),
        "--",
        "--backend",
        "openai",
        "--base-url",
        root,
        "--endpoint",
        "/v1/completions",
        "--model",
        tokenizer,
        "--served-model-name",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(plan.input_len),
        "--random-output-len",
        str(plan.output_len),
        "--ignore-eos",
        "--seed",
        str(plan.seed),
        "--num-warmups",
        str(plan.warmups),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,99",
        "--goodput",
        f"ttft:{plan.slo_ttft_ms:g}",
        f"tpot:{plan.slo_tpot_ms:g}",
    ]
    if plan.slo_headers:
        cmd += [
            "--header",
            f"x-slo-ttft-ms={plan.slo_ttft_ms:g}",
            f"x-slo-tpot-ms={plan.slo_tpot_ms:g}",
        ]
    return cmd


def harness_timeout_s(plan: Plan) -> float:
    """How long one ladder may take: start-up, then each rate's arrivals and a drain of up to
    five times as long (an overloaded bare engine answers its backlog for a while)."""
    return 180.0 + sum(plan.seconds * 6.0 + 30.0 for _ in plan.rates)


def read_steps(name: str, rates: tuple[float, ...], result_dir: Path) -> list[Step]:
    """The steps whose result files exist (a failed rate has none)."""
    import json

    steps = []
    for rate in rates:
        path = result_dir / result_name(rate)
        if path.exists():
            steps.append(step_from_result(name, rate, json.loads(path.read_text())))
    return steps


def measure(
    name: str,
    base_url: str,
    model: str,
    tokenizer: str,
    plan: Plan,
    out_dir: Path,
    runner: Callable[..., Any] = subprocess.run,
) -> tuple[list[Step], str | None]:
    """Run the harness against a system that answers at `base_url`; the steps and, when some
    rate left no result, why (the end of the harness's log)."""
    result_dir = out_dir / "vllm-results" / name
    for old in result_dir.glob("rate-*.json"):
        old.unlink()
    log = out_dir / "logs" / f"{name}-harness.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = harness_command(plan, base_url, model, tokenizer, result_dir)
    env_note = None
    with log.open("w") as fh:
        try:
            proc = runner(
                cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=harness_timeout_s(plan),
                start_new_session=True,  # its own autogroup, whose priority it raises
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc, env_note = -1, f"harness ran past {harness_timeout_s(plan):.0f} s"
    steps = read_steps(name, plan.rates, result_dir)
    if rc == 0 and len(steps) == len(plan.rates):
        return steps, None
    tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
    why = env_note or f"harness exited with status {rc}"
    return steps, f"{why}: {' | '.join(tail)[:400]} (log: {log})"


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_system(
    spec: SystemSpec,
    plan: Plan,
    tokenizer: str,
    out_dir: Path,
    report: Callable[[str], None] = print,
    launcher: Callable[..., Running] = launch,
    runner: Callable[..., Any] = subprocess.run,
    cpu: Callable[[int], CpuSplit] = tree_cpu,
    sampler: Callable[[int], Sampling] = CpuSampler,
) -> SystemRun:
    """Start `spec`, run the ladder against it, stop it; never raises for a system that
    cannot start or fails (the reason is in `why_not`)."""
    run = SystemRun(spec.name, spec.engines, spec.base_url)
    report(f"== {spec.name}: starting")
    try:
        running = launcher(spec, out_dir / "logs", lambda s: answers(s.base_url, s.model))
    except NotStarted as err:
        run.why_not = str(err)
        report(f"== {spec.name}: cannot run: {err}")
        return run
    run.startup_s = running.startup_s
    report(f"== {spec.name}: up in {running.startup_s:.1f} s, vLLM's benchmark running")
    try:
        before = cpu(running.proc.pid)
        load_before = _load_average()
        series = sampler(running.proc.pid)
        series.start()
        try:
            run.steps, run.why_not = measure(
                spec.name, spec.base_url, spec.model, tokenizer, plan, out_dir, runner
            )
        finally:
            samples = series.stop()
            run.load_average = (load_before, _load_average())
            report(f"== {spec.name}: load average {load_before} -> {run.load_average[1]}")
        used = cpu(running.proc.pid).minus(before)
        run.cpu_engine_s, run.cpu_outside_s = round(used.engine_s, 1), round(used.outside_s, 1)
        windows = rate_windows(out_dir / "vllm-results" / spec.name, plan.rates)
        run.cpu_by_rate = cpu_by_rate(samples, windows)
    finally:
        stop(running)
    if run.why_not:
        report(f"== {spec.name}: {run.why_not}")
    return run


def run_url(
    name: str,
    base_url: str,
    model: str,
    tokenizer: str,
    plan: Plan,
    out_dir: Path,
    report: Callable[[str], None] = print,
    runner: Callable[..., Any] = subprocess.run,
) -> SystemRun:
    """The ladder against a system already running at `base_url` (started by someone else)."""
    run = SystemRun(name, 0, base_url)
    if not answers(base_url, model):
        run.why_not = f"no chat completion answered at {base_url}"
        report(f"== {name}: cannot run: {run.why_not}")
        return run
    report(f"== {name}: at {base_url}, vLLM's benchmark running")
    run.steps, run.why_not = measure(name, base_url, model, tokenizer, plan, out_dir, runner)
    if run.why_not:
        report(f"== {name}: {run.why_not}")
    return run
