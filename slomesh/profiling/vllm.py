"""Profiling a real vLLM engine (the CPU build here; any model dir or name on GPU machines).

Shell over the pure sweep (services/profiler/core): starts vLLM's synchronous v1 `LLMEngine`
in this process, drives it one `step()` at a time and times each step on the wall clock.
Sweep-specific engine settings: prefix caching off (a repeated prompt must not hit the cache),
async scheduling off (one step() = one forward pass), the step token budget raised so each
prefill point runs in one step; prompts are seeded random token ids and `ignore_eos` makes every
request generate exactly max_tokens tokens.

Facts read from the engine after start: KV capacity = allocated blocks x block size x bytes per
token, bytes per token = 2 · layers · kv_heads · head_dim · KV dtype bytes (model config),
weight bytes = the loaded parameters' bytes, cold_load_bytes_s = weight bytes / the measured
engine start-up time, swap_bytes_s = measured copy bandwidth (drivers/bandwidth.py).

Threads: Ray gives a Serve replica OMP_NUM_THREADS = its num_cpus (1 by default), so the vLLM
replicas run torch with one intra-op thread; the sweep does the same (OMP_NUM_THREADS=1 unless
the environment sets it) so the profile describes the engine as it serves. (On the shared
2-core machine two OpenMP threads also spin-wait on each other under contention: steps were
5-20x slower and erratic.)

Scripts that call this need an `if __name__ == "__main__":` guard (vLLM may spawn processes).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.profiler.bandwidth import measure_copy_bytes_s
from services.profiler.core.devices import CPU, catalog_gpu_name
from services.profiler.core.profile_fit import EngineFacts, FittedProfile, fit_sweep
from services.profiler.core.runner import StepObservation, run_sweep
from services.profiler.core.sweep import EngineLimits, SweepSettings, plan_sweep
from services.replica.vllm.config import VLLMEngineConfig
from slomesh.sim.sweep_engine import SimSweepEngine


class VLLMSweepEngine:
    """`SweepEngine` over vLLM's LLMEngine (wall clock; random prompts of exact lengths)."""

    def __init__(self, llm: Any, vocab_size: int, seed: int = 0) -> None:
        self.llm = llm
        self._rng = random.Random(seed)
        # keep clear of the special tokens at the start of the vocabulary
        self._lo = min(100, vocab_size // 2)
        self._hi = vocab_size - 1

    def now_s(self) -> float:
        return time.perf_counter()

    def add(self, request_id: str, input_tokens: int, max_tokens: int) -> None:
        from vllm.sampling_params import RequestOutputKind, SamplingParams

        ids = [self._rng.randint(self._lo, self._hi) for _ in range(input_tokens)]
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=0.0,
            ignore_eos=True,
            output_kind=RequestOutputKind.DELTA,
        )
        self.llm.add_request(request_id, {"prompt_token_ids": ids}, params)

    def step(self) -> StepObservation:
        outs = self.llm.step()
        emitted = sum(1 for o in outs if o.outputs and o.outputs[0].token_ids)
        return StepObservation(emitted=emitted, finished=sum(1 for o in outs if o.finished))

    def has_work(self) -> bool:
        return bool(self.llm.has_unfinished_requests())


def _weight_bytes(llm: Any, model: str) -> int:
    def param_bytes(m: Any) -> int:
        return int(sum(p.numel() * p.element_size() for p in m.parameters()))

    try:
        return int(sum(llm.apply_model(param_bytes)))
    except Exception:  # the executor cannot run the function: size the checkpoint files
        files = [*Path(model).glob("*.safetensors"), *Path(model).glob("*.bin")]
        if not files:
            raise RuntimeError(f"cannot tell the weight bytes of {model}") from None
        return sum(f.stat().st_size for f in files)


def _device(current_platform: Any) -> tuple[str, str]:
    """(profile gpu name, torch device for the copy benchmark)."""
    if current_platform.is_cpu():
        return CPU, "cpu"
    import torch

    props = torch.cuda.get_device_properties(0)
    return catalog_gpu_name(torch.cuda.get_device_name(0), int(props.total_memory)), "cuda:0"


def engine_facts(
    llm: Any, config: VLLMEngineConfig, gpu: str, start_s: float, swap: float
) -> EngineFacts:
    """KV, weight and bandwidth facts of a started engine (module docstring)."""
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype

    vc = llm.vllm_config
    mc = vc.model_config
    dtype = kv_cache_dtype_str_to_dtype(vc.cache_config.cache_dtype, mc)
    per_token = (
        2
        * mc.get_total_num_hidden_layers()
        * mc.get_total_num_kv_heads()
        * mc.get_head_size()
        * dtype.itemsize
    )
    blocks = int(vc.cache_config.num_gpu_blocks or 0)
    weights = _weight_bytes(llm, config.model)
    return EngineFacts(
        gpu=gpu,
        model=config.active_model,
        tensor_parallel=config.tensor_parallel_size,
        kv_capacity_bytes=blocks * vc.cache_config.block_size * per_token,
        kv_bytes_per_token=per_token,
        weight_bytes=weights,
        swap_bytes_s=swap,
        cold_load_bytes_s=weights / start_s,
    )


def engine_limits(llm: Any) -> EngineLimits:
    vc = llm.vllm_config
    bs = int(vc.cache_config.block_size)
    return EngineLimits(
        max_num_seqs=int(vc.scheduler_config.max_num_seqs),
        max_num_batched_tokens=int(vc.scheduler_config.max_num_batched_tokens),
        kv_capacity_tokens=int(vc.cache_config.num_gpu_blocks or 0) * bs,
        max_model_len=int(vc.model_config.max_model_len),
        block_size_tokens=bs,
    )


def _engine_info(llm: Any, config: VLLMEngineConfig, device: str, version: str) -> dict[str, Any]:
    vc = llm.vllm_config
    return {
        "vllm_version": version,
        "model": config.model,
        "served_model_name": config.active_model,
        "device": device,
        "dtype": str(vc.model_config.dtype),
        "enforce_eager": config.enforce_eager,
        "prefix_caching": False,
        "kv_blocks": int(vc.cache_config.num_gpu_blocks or 0),
        "torch_threads": llm.apply_model(_torch_threads),
    }


def _torch_threads(_model: Any) -> int:
    import torch

    return int(torch.get_num_threads())


def profile_vllm(
    config: VLLMEngineConfig,
    settings: SweepSettings,
    progress: Callable[[str], None] | None = None,
) -> FittedProfile:
    """Start vLLM with `config` (prefix caching forced off), sweep it and fit its profile."""
    say = progress or (lambda _msg: None)
    t_start = time.perf_counter()
    load_before = os.getloadavg()[0]
    config = config.model_copy(update={"enable_prefix_caching": False})
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if config.multiprocessing else "0"
    threads = int(os.environ.setdefault("OMP_NUM_THREADS", "1"))
    import torch

    torch.set_num_threads(threads)  # in case torch was imported before the variable was set
    from vllm import __version__ as vllm_version
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform
    from vllm.v1.engine.llm_engine import LLMEngine

    import_s = time.perf_counter() - t_start
    gpu, device = _device(current_platform)
    t0 = time.perf_counter()
    swap = measure_copy_bytes_s(device)
    bandwidth_s = time.perf_counter() - t0
    say(f"vllm {vllm_version} imported in {import_s:.1f} s; starting the engine ({config.model})")
    args = EngineArgs(**config.engine_args_kwargs(), async_scheduling=False, disable_log_stats=True)
    t0 = time.perf_counter()
    llm = LLMEngine.from_engine_args(args)
    start_s = time.perf_counter() - t0
    try:
        facts = engine_facts(llm, config, gpu, start_s, swap)
        plan = plan_sweep(engine_limits(llm), settings)
        say(
            f"engine up in {start_s:.1f} s; sweeping {len(plan.runs)} runs "
            f"({len(plan.prefill)} prefill + {len(plan.decode)} decode points) "
            f"and {len(plan.mixed)} mixed requests"
        )
        vocab = int(llm.vllm_config.model_config.get_vocab_size())
        measured = run_sweep(VLLMSweepEngine(llm, vocab, settings.seed), plan, say)
        info = _engine_info(llm, config, device, vllm_version)
    finally:
        llm.engine_core.shutdown()  # (it resets the config's block count: read it before)
    fitted = fit_sweep(measured, facts, "vllm", SimSweepEngine)
    fitted.report["engine_info"] = info
    fitted.report["host"] = {
        "cpu_count": os.cpu_count(),
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": os.getloadavg()[0],
        "clock": "wall (time.perf_counter around LLMEngine.step)",
    }
    fitted.report["timings_s"].update(
        {
            "vllm_import": import_s,
            "engine_start": start_s,
            "bandwidth": bandwidth_s,
            "total": time.perf_counter() - t_start,
        }
    )
    return fitted
