"""Building a replica's engine from its arguments: one model, or the model host of a replica
that swaps between several (model_host.py, model_swap.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from services.replica.core.queue_policies import QUEUE_POLICIES
from services.replica.engine import Engine
from services.replica.model_host import ModelHost
from services.replica.model_swap import Loaded, model_host
from services.replica.sim_engine import AsyncSimEngine
from shared.domain import DecodeCoeffs, HardwareProfile, PrefillCoeffs, WallClock
from shared.profiles.defaults import default_profile

if TYPE_CHECKING:
    from services.replica.args import ReplicaArgs


def _scaled(p: HardwareProfile, k: float) -> HardwareProfile:
    pre, dec = p.prefill, p.decode
    return replace(
        p,
        prefill=PrefillCoeffs(pre.p1 * k, pre.p2 * k, pre.p3 * k, pre.p4 * k, pre.p5 * k),
        decode=DecodeCoeffs(dec.d1 * k, dec.d2 * k, dec.d3 * k, dec.d4 * k),
        source=f"{p.source} x{k:g}",
    )


def build_engine(args: ReplicaArgs) -> Engine:
    if args.engine == "vllm":
        from services.replica.vllm.config import VLLMEngineConfig
        from services.replica.vllm.engine import VLLMEngine

        settings = {
            "model": args.model,
            "served_model_name": args.model,
            "tensor_parallel_size": args.tensor_parallel,
            "pipeline_parallel_size": args.pipeline_parallel,
            **args.adapters.engine_settings(),
            **args.vllm,
        }
        if str(settings.get("model", "")).startswith("~"):
            settings["model"] = str(Path(settings["model"]).expanduser())
        return VLLMEngine(VLLMEngineConfig.model_validate(settings))
    gpus = args.tensor_parallel * args.pipeline_parallel  # a pipeline's GPUs as one TP group
    tiers = args.model_tiers
    if tiers is not None and tiers.active != args.model:
        raise ValueError(
            f"model_tiers.active must be the replica's model '{args.model}', got '{tiers.active}'"
        )
    models = [args.model] if tiers is None else [args.model, *tiers.warm, *tiers.cold]
    profiles = {
        m: _scaled(default_profile(args.gpu, m, gpus), args.step_time_scale) for m in models
    }
    config = args.engine_config
    if tiers is not None:
        config = config.model_copy(update={"host_model_cache_bytes": tiers.host_budget_bytes})
    engine = AsyncSimEngine(args.application, profiles, config, WallClock(), args.model)
    for m in tiers.warm if tiers is not None else ():
        engine.core.tiers.prewarm(m)
    return engine


def model_args(args: ReplicaArgs, model: str) -> ReplicaArgs:
    """The replica's arguments as a replica serving `model` of its `swap_models` alone."""
    if model == args.model:
        return args.model_copy(update={"swap_models": {}})
    spec = args.swap_models[model]
    return args.model_copy(
        update={
            "model": model,
            "vllm": {**args.vllm, "served_model_name": model, **spec.vllm},
            "serving": spec.serving or args.serving,
            "swap_models": {},
            "model_tiers": None,
        }
    )


def build_host(args: ReplicaArgs) -> ModelHost[Loaded]:
    """The model host of a replica with `swap_models` (model_swap.py)."""
    models = [args.model, *args.swap_models]
    per_model = {m: model_args(args, m) for m in models}
    gpus = args.tensor_parallel * args.pipeline_parallel
    load_s = {}
    for m in models if args.engine == "simulated" else ():
        p = default_profile(args.gpu, m, gpus)
        load_s[m] = p.weight_bytes / p.cold_load_bytes_s * args.step_time_scale
    return model_host(
        models,
        args.engine,
        lambda m: build_engine(per_model[m]),
        {m: a.serving for m, a in per_model.items()},
        sleep_mode=bool(args.vllm.get("enable_sleep_mode")),
        deadline_ordered=QUEUE_POLICIES.create(_queue_policy(args)).deadline_ordered,
        load_time_s=load_s,
        tokenizer_model=args.tokenizer_model,
        max_model_len=args.max_model_len,
    )


def _queue_policy(args: ReplicaArgs) -> str:
    """The name of the replica's engine queue policy (vLLM's scheduler hook, or the simulated
    engine's)."""
    if args.engine == "vllm":
        return str(args.vllm.get("queue_policy", "fcfs"))
    return args.engine_config.queue_policy
