"""The configuration reference: every field of every config model, generated from the code.

PAGES names the root models of each page (the Serve applications' args, the scheduler's policy
options, ...); every pydantic model reachable from a root through its fields' types is listed
on the first page that reaches it, one table per model: field, type, default, unit and the
field's docstring (the attribute docstring under it, else its `description`). `make docs` runs
this through the site's hook (docs/hooks/config_reference.py); `python -m
slomesh.config_reference DIR` writes the pages into DIR. NOT_CONFIG lists the models that are
request or answer shapes, not configuration; tests/unit/test_docs.py checks that every other
model in the source tree appears here.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import itertools
import json
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Page:
    slug: str
    title: str
    intro: str
    roots: tuple[str, ...]


PAGES = (
    Page("applications", "Serve applications",
         "The `args` of each application of a Serve config ([Serve configs]"
         "(../operations/serve-configs.md)), and the models they hold.",
         ("services.ingress.args:IngressArgs", "services.scheduler.args:SchedulerArgs",
          "services.predictor.deployment:PredictorArgs",
          "services.profiler.deployment:ProfilerArgs",
          "services.replica.deployment:ReplicaArgs", "services.replica.pool:PoolArgs",
          "services.replica.vllm.config:VLLMEngineConfig",
          "services.deployer.deployment:DeployerArgs")),
    Page("policies", "Scheduler policies",
         "The scheduler's `policy_options` (by `policy`), the engine queue settings of the "
         "serving stacks and the autoscaling policies.",
         ("services.scheduler.core.qlm.config:QLMConfig",
          "services.scheduler.core.batching.config:BatchingConfig",
          "services.scheduler.core.autoscale.config:AutoscaleConfig",
          "services.scheduler.core.prefix_affinity:PrefixAffinityConfig",
          "services.scheduler.core.adapter_affinity:AdapterAffinityConfig",
          "services.scheduler.core.policies:RouterOptions",
          "services.scheduler.core.routers.pow2:Pow2Params",
          "services.scheduler.core.routers.pow2_prefix:Pow2PrefixParams",
          "services.scheduler.core.routers.llm_d_scorers:LlmdScorerParams",
          "services.scheduler.core.routers.multiplex:MultiplexParams",
          "services.scheduler.core.routers.static_placement:StaticParams",
          "services.scheduler.core.flow_control:FlowControlConfig",
          "services.scheduler.core.latency_slo_admitter:LatencySLOAdmitterConfig",
          "shared.domain.scorpio:ScorpioConfig", "shared.domain.engine:EngineConfig")),
    Page("deployer", "Deployer and GPU clusters",
         "The GPU cluster file (`deploy/gpu/cluster.yaml`, `slomesh gpu-config`), the planners' "
         "options and inventories (`slomesh plan`), and the Serve config writer's options.",
         ("services.deployer.core.gpu_cluster:GPUCluster",
          "services.deployer.core.inventory:Inventory",
          "services.deployer.core.model:PlanOptions",
          "services.deployer.core.serve_config:ServeOptions")),
    Page("estimates", "Predictor and profiler",
         "The length predictor's training and online settings, and the profiler's sweep.",
         ("services.predictor.core.learned.training:TrainConfig",
          "services.predictor.core.learned.predictor:LearnedConfig",
          "services.predictor.core.online_histogram:OnlineHistogramConfig",
          "services.profiler.core.sweep:SweepSettings",
          "shared.profiles.roofline:RooflineParams")),
    Page("bench", "Simulator and bench",
         "Scenarios, workloads, clusters and serving stacks of `slomesh bench` and its "
         "relatives.",
         ("slomesh.bench.scenarios.spec:ScenarioSpec", "slomesh.stacks.config:StackConfig",
          "slomesh.sim.cluster:ClusterSpec", "shared.workloads.spec:WorkloadSpec",
          "slomesh.bench.capacity:CapacitySettings",
          "slomesh.bench.agree.workload:AgreeWorkloadSpec",
          "slomesh.bench.scenarios.diurnal:DiurnalSpec",
          "shared.workloads.conversations:ConversationSpec",
          "slomesh.sim.shards:ShardModel", "slomesh.sim.scheduler:SimAdmissionConfig",
          "slomesh.sim.ingress:SimIngressConfig",
          "slomesh.bench.goodput.speed_fit:HostSpeedFit",
          "slomesh.sim.live_view:LiveViewConfig")),
)  # fmt: skip

NOT_CONFIG = frozenset({
    "services.ingress.core.errors:ErrorDetail", "services.ingress.core.errors:ErrorResponse",
    "services.ingress.core.openai_schema:SLOObject",
    "services.ingress.core.openai_schema:StreamOptions",
    "services.ingress.core.openai_schema:_Common",
    "services.ingress.core.openai_schema:ChatMessage",
    "services.ingress.core.openai_schema:ChatCompletionRequest",
    "services.ingress.core.openai_schema:CompletionRequest",
    "slomesh.cli.predictor_replay:ReplayInput",
    "slomesh.cli.predictor_inputs:PredictInput",
})  # fmt: skip
"""Request and answer shapes (the API's, documented with it), not configuration."""

UNITS = (
    ("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes"), ("_gb", "GB"), ("_mb", "MB"),
    ("_tokens", "tokens"), ("_rps", "requests/s"), ("_per_s", "per s"), ("_fraction", "fraction"),
    ("_tok_s", "tokens/s"), ("_pct", "%"),
)  # fmt: skip


def load(ref: str) -> type[BaseModel]:
    module, _, name = ref.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls, type) and issubclass(cls, BaseModel), ref
    return cls


def ref_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def anchor(cls: type) -> str:
    return ref_of(cls).replace(":", "-").replace(".", "-").replace("_", "-").lower()


def nested_models(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a field type (through unions, containers, Annotated)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(tp):
        out += nested_models(arg)
    return out


def attribute_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the string literal written under it, for `cls` and its model bases."""
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if not (isinstance(base, type) and issubclass(base, BaseModel)) or base is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(base)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                out[stmt.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def type_text(tp: Any) -> str:
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) if isinstance(a, str) else repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_text(a) for a in args)}]"
    return str(tp).replace("typing.", "")


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return "defaults"
    if isinstance(value, enum.Enum):
        value = value.value
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def unit_of(name: str) -> str:
    return next((unit for suffix, unit in UNITS if name.endswith(suffix)), "")


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def collect() -> dict[str, list[type[BaseModel]]]:
    """Page slug -> its models, in the order reached; each model on one page only."""
    seen: set[type[BaseModel]] = set()
    out: dict[str, list[type[BaseModel]]] = {}
    for page in PAGES:
        models: list[type[BaseModel]] = []
        queue = [load(r) for r in page.roots]
        while queue:
            cls = queue.pop(0)
            if cls in seen:
                continue
            seen.add(cls)
            models.append(cls)
            for f in cls.model_fields.values():
                queue += nested_models(f.annotation)
        out[page.slug] = models
    return out


def render_model(cls: type[BaseModel], where: dict[type[BaseModel], str], here: str) -> str:
    docs = attribute_docstrings(cls)
    summary = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]
    lines = [
        f"## {cls.__name__} {{#{anchor(cls)}}}",
        "",
        f"`{ref_of(cls)}`. {' '.join(summary.split())}",
        "",
        "| field | type | default | unit | description |",
        "|---|---|---|---|---|",
    ]
    for name, f in cls.model_fields.items():
        kind = type_text(f.annotation)
        links = [
            f"[{m.__name__}]({'' if where[m] == here else where[m] + '.md'}#{anchor(m)})"
            for m in dict.fromkeys(nested_models(f.annotation))
            if m in where
        ]
        kind_cell = f"`{cell(kind)}`" + (f" ({', '.join(links)})" if links else "")
        desc = docs.get(name) or f.description or ""
        lines.append(
            f"| `{name}` | {kind_cell} | `{cell(default_text(f))}` | {unit_of(name)} "
            f"| {cell(desc)} |"
        )
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Page path under docs/ -> Markdown, for every page of PAGES."""
    by_page = collect()
    where = {m: slug for slug, models in by_page.items() for m in models}
    out = {}
    for page in PAGES:
        note = "Generated from the code by `slomesh/config_reference.py`; do not edit."
        body = [f"# {page.title}", "", page.intro, "", note, ""]
        body += [render_model(m, where, page.slug) for m in by_page[page.slug]]
        out[f"configuration/{page.slug}.md"] = "\n".join(body)
    return out


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("docs")
    for rel, text in pages().items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
