"""From a stack file's stage choices to the resolved stack (config.StackConfig).

The family comes first: orderer `qlm` makes a QLM stack, a cluster batch former (`scls-dp`,
`slo-odbs`, ...) a batching stack, anything else a router stack whose placer is the router. Then
every stage's plugin resolves for that family (stages.py) and the fragments merge: exactly one
plugin selects the global policy, the others add its options, the engine fields and the SCORPIO
guards. The guards are off unless a plugin switches one on; with all three off the engines run
without SCORPIO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from shared.domain.scorpio import ScorpioConfig
from slomesh.stacks.config import StackConfig, StageChoice, deep_merge
from slomesh.stacks.stages import CLUSTER_FORMERS, STAGES, StageError, create_plugin

_GUARDS_OFF = {"credit_batching": False, "vbs_admission": False, "ttft_guard": False}


def family_of(stages: Mapping[str, StageChoice]) -> str:
    """router, qlm or batching (see the module docstring)."""
    qlm = stages["orderer"].plugin == "qlm"
    batching = stages["batch_former"].plugin in CLUSTER_FORMERS
    if qlm and batching:
        raise StageError(
            "stages.batch_former: a cluster batch former and orderer 'qlm' both hold requests "
            "centrally; pick one"
        )
    return "qlm" if qlm else "batching" if batching else "router"


def compose(name: str, description: str, stages: Mapping[str, StageChoice]) -> StackConfig:
    """The resolved stack; a missing, unknown or misfit stage is a StageError naming it."""
    missing = [s for s in STAGES if s not in stages]
    if missing:
        raise StageError(f"stages.{missing[0]}: missing (a stack names every stage: {STAGES})")
    extra = sorted(set(stages) - set(STAGES))
    if extra:
        raise StageError(f"stages.{extra[0]}: not a stage (valid: {', '.join(STAGES)})")
    family = family_of(stages)
    policy: str | None = None
    selected_by = ""
    options: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    scorpio: dict[str, Any] = dict(_GUARDS_OFF)
    for stage in STAGES:
        choice = stages[stage]
        frag = create_plugin(stage, choice.plugin, choice.params).fragment(family)
        if frag.policy is not None:
            if policy is not None:
                raise StageError(
                    f"stages.{stage}: '{choice.plugin}' and stages.{selected_by} both choose "
                    "the scheduler's policy"
                )
            policy, selected_by = frag.policy, stage
        options = deep_merge(options, frag.options)
        fields.update(frag.fields)
        scorpio = deep_merge(scorpio, frag.scorpio)
    if policy is None:
        raise StageError("stages.placer: a router stack needs a router placer")
    guards = any(scorpio[k] for k in _GUARDS_OFF)
    try:
        return StackConfig(
            name=name,
            description=description,
            policy=policy,
            policy_options=options,
            scorpio=ScorpioConfig.model_validate(scorpio) if guards else None,
            stages=dict(stages),
            **fields,
        )
    except ValidationError as err:
        raise StageError(f"stack '{name}': {err}") from None
