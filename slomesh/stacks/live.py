"""A stack on the live mesh: its stages applied to a Serve config, or refused naming the field.

What each stage becomes live:
- the admitter's `max_in_flight_per_replica`: the scheduler's in-flight cap per replica.
- `admitter: ttft-guard`: the scheduler's TTFT admission (`ttft_guard` of the scheduler's args,
  services/scheduler/core/ttft_admission.py), its one home: the simulator runs the same
  admission (slomesh/sim/scheduler.py) and its engines run without SCORPIO's TTFT guard too
  (an engine guard would cut streams the ingress has already answered).
- orderer, placer, evictor, shedder and a cluster batch former: the scheduler's global policy and
  its options, the same core the simulator runs.
- `batch_former: scorpio`, `engine_queue`, `engine_mode`, `preemption`: every replica's engine.
- `length_source`: the predictor application's predictor; its predictions reach the scheduler
  as each request's length hint.

Refused (the live mesh cannot run it): true lengths (`length_source: oracle`, placer
`oracle-ttft`, queue `oracle-edf`: a live request's output length is unknown); on vLLM replicas,
static batches (`engine_mode: static`), swap or cost-chosen preemption (vLLM v1 preempts by
recompute), and VBS admission on a replica without a decode profile; batch formers planning on
a scheduler-side predictor (live they plan on hints: `length_source: hints`).
"""

from __future__ import annotations

import copy
from typing import Any

from slomesh.stacks.config import StackConfig
from slomesh.stacks.stages import CLUSTER_FORMERS


class StackRefused(ValueError):
    """The live mesh cannot run a stage of the stack as it is written (names the field)."""


def _refuse(stack: StackConfig, field: str, why: str) -> StackRefused:
    return StackRefused(f"stack '{stack.name}': stages.{field}: {why}")


def check_live(stack: StackConfig, vllm_replicas: bool) -> None:
    """Raise StackRefused for the first stage the live mesh cannot honour."""
    st = stack.stages
    if not st:
        raise StackRefused(f"stack '{stack.name}' was not read from a stack file")
    if st["length_source"].plugin == "oracle":
        raise _refuse(stack, "length_source", "'oracle' needs true output lengths, unknown live")
    if st["placer"].plugin == "oracle-ttft":
        raise _refuse(stack, "placer", "'oracle-ttft' needs true output lengths, unknown live")
    if st["engine_queue"].plugin == "oracle-edf":
        raise _refuse(stack, "engine_queue", "'oracle-edf' needs true output lengths")
    if st["batch_former"].plugin in CLUSTER_FORMERS and st["length_source"].plugin != "hints":
        raise _refuse(
            stack,
            "length_source",
            f"'{st['length_source'].plugin}': the live scheduler has no length predictor of its "
            "own; batch formers plan on each request's hint there (length_source: hints)",
        )
    if not vllm_replicas:
        return
    if stack.engine_mode != "continuous":
        raise _refuse(
            stack, "engine_mode", f"'{stack.engine_mode}': vLLM replicas batch continuously"
        )
    if stack.preemption_mode != "recompute":
        raise _refuse(
            stack,
            "preemption",
            f"'{stack.preemption_mode}': vLLM v1 replicas preempt and evict by recompute only",
        )


def _scheduler_args(stack: StackConfig, args: dict[str, Any]) -> None:
    args["policy"] = stack.policy
    args["policy_options"] = copy.deepcopy(stack.policy_options)
    args["stack"] = stack.name
    if stack.max_in_flight_per_replica is not None:
        args["max_in_flight_per_replica"] = stack.max_in_flight_per_replica
    admitter = stack.stages["admitter"]
    guard = dict(args.get("ttft_guard") or {})
    guard["enabled"] = admitter.plugin == "ttft-guard"
    if guard["enabled"] and "margin_s" in admitter.params:
        guard["margin_s"] = admitter.params["margin_s"]
    if guard["enabled"] and "deadline_aware" in admitter.params:
        guard["deadline_aware"] = bool(admitter.params["deadline_aware"])
    if guard["enabled"] and "bounds_in_flight" in admitter.params:
        guard["bounds_in_flight"] = bool(admitter.params["bounds_in_flight"])
    args["ttft_guard"] = guard


def _deadline_aware_guard(stack: StackConfig) -> bool:
    """The admitter is the TTFT guard counting only the backlog due first (its replicas then
    list their waiting requests in their state)."""
    admitter = stack.stages["admitter"]
    return admitter.plugin == "ttft-guard" and bool(admitter.params.get("deadline_aware"))


def _engine_settings(stack: StackConfig, app: dict[str, Any], args: dict[str, Any]) -> None:
    vllm = args.get("engine") == "vllm"
    key = "vllm" if vllm else "engine_config"
    engine = dict(args.get(key) or {})  # YAML anchors share one dict between replicas
    engine["queue_policy"] = stack.queue_policy
    engine["report_waiting_prefill"] = _deadline_aware_guard(stack)
    scorpio = stack.scorpio.model_copy(update={"ttft_guard": False}) if stack.scorpio else None
    if scorpio is not None and not (scorpio.credit_batching or scorpio.vbs_admission):
        scorpio = None  # only the TTFT guard: the scheduler's admission runs it
    engine.pop("scorpio", None)
    if scorpio is not None:
        if vllm and scorpio.vbs_admission and not engine.get("decode_coeffs"):
            raise _refuse(
                stack,
                "batch_former.params.vbs_admission",
                f"{app['name']} has no decode profile to admit by (`slomesh up --profile`)",
            )
        engine["scorpio"] = scorpio.model_dump()
    if not vllm:
        engine["mode"] = stack.engine_mode
        engine["preemption_mode"] = stack.preemption_mode
    args[key] = engine


def apply_stack(config: dict[str, Any], stack: StackConfig) -> dict[str, Any]:
    """`config` (a Serve config) running `stack`; StackRefused names the stage it cannot run."""
    apps = config["applications"]
    replicas = [a for a in apps if str(a.get("name", "")).startswith("replica-")]
    check_live(stack, any((a.get("args") or {}).get("engine") == "vllm" for a in replicas))
    out = copy.deepcopy(config)
    for app in out["applications"]:
        args = app.setdefault("args", {})
        if app["name"] == "scheduler":
            _scheduler_args(stack, args)
        elif app["name"] == "predictor" and stack.stages["length_source"].plugin != "hints":
            args["predictor"] = stack.length_predictor
        elif app["name"].startswith("replica-"):
            _engine_settings(stack, app, args)
    return out
