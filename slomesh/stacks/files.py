"""Stack files: YAML naming a plugin and its parameters for each stage, read by bench and up.

A file is either a whole stack (`name`, `description`, `stages` with every stage) or an override
(`extends: <stack name or path>` plus the stages it changes). A stage is a plugin name or a
mapping `{plugin: NAME, params: {...}}`. Overriding a stage with the same plugin merges the
parameters key by key; naming another plugin replaces the stage (its parameters start empty).

`load_stack(ref)` takes a name of a shipped stack (a file in this package, `<name>.yaml`) or a
path to a file (anything ending in .yaml/.yml or containing a path separator). `STACKS` is the
shipped library under the registry interface the bench uses (`names`, `check`, `create`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from shared.policy import UnknownNameError
from slomesh.stacks.compose import compose
from slomesh.stacks.config import StackConfig, StageChoice, deep_merge
from slomesh.stacks.stages import StageError

STACK_DIR = Path(__file__).resolve().parent / "library"
"""The shipped stack files (package data)."""

_KEYS = {"name", "description", "extends", "stages"}


class StackFileError(ValueError):
    """A stack file that cannot be read or resolved; the message names the file and field."""


def stack_names() -> list[str]:
    """The shipped stacks, sorted."""
    return sorted(p.stem for p in STACK_DIR.glob("*.yaml"))


def _is_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or "/" in ref


def _path_of(ref: str, relative_to: Path | None = None) -> Path:
    if _is_path(ref):
        path = Path(ref).expanduser()
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
        if not path.is_file():
            raise StackFileError(f"stack file {ref} does not exist")
        return path
    if ref not in stack_names():
        raise UnknownNameError("stack", ref, stack_names())
    return STACK_DIR / f"{ref}.yaml"


def _stage(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        return {"plugin": value, "params": {}}
    if not isinstance(value, Mapping) or not isinstance(value.get("plugin", ""), str):
        raise StackFileError(f"{where}: a plugin name or {{plugin: NAME, params: {{...}}}}")
    bad = sorted(set(value) - {"plugin", "params"})
    if bad:
        raise StackFileError(f"{where}.{bad[0]}: unknown key (valid: plugin, params)")
    params = value.get("params") or {}
    if not isinstance(params, Mapping):
        raise StackFileError(f"{where}.params: must be a mapping")
    return {"plugin": value.get("plugin"), "params": dict(params)}


def _merge_stages(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for stage, choice in over.items():
        old = out.get(stage)
        if old is not None and choice["plugin"] in (None, old["plugin"]):
            out[stage] = {
                "plugin": old["plugin"],
                "params": deep_merge(old["params"], choice["params"]),
            }
        else:
            out[stage] = choice
    return out


def _read(path: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    """The file's fields with `extends` resolved (stages as {plugin, params} mappings)."""
    if path in seen:
        raise StackFileError(f"{path}: extends itself through {' -> '.join(map(str, seen))}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise StackFileError(f"{path}: not YAML ({err})") from None
    if not isinstance(data, Mapping):
        raise StackFileError(f"{path}: a stack file is a mapping with name, description, stages")
    bad = sorted(set(data) - _KEYS)
    if bad:
        raise StackFileError(f"{path}: {bad[0]}: unknown key (valid: {', '.join(sorted(_KEYS))})")
    raw_stages = data.get("stages") or {}
    if not isinstance(raw_stages, Mapping):
        raise StackFileError(f"{path}: stages: must be a mapping of stage -> plugin")
    stages = {k: _stage(v, f"{path}: stages.{k}") for k, v in raw_stages.items()}
    base: dict[str, Any] = {"stages": {}}
    if data.get("extends") is not None:
        parent = _path_of(str(data["extends"]), path.parent)
        base = _read(parent, (*seen, path))
    for key in ("name", "description"):
        if key in data and not isinstance(data[key], str):
            raise StackFileError(f"{path}: {key}: must be a string")
    out = {k: v for k, v in base.items() if k in ("name", "description")}
    out.update({k: data[k] for k in ("name", "description") if k in data})
    out["stages"] = _merge_stages(base["stages"], stages)
    return out


def read_stack_file(path: Path) -> StackConfig:
    """The stack a file describes, resolved."""
    data = _read(path.resolve(), ())
    for key in ("name", "description"):
        if not data.get(key):
            raise StackFileError(f"{path}: {key}: missing")
    for stage, choice in data["stages"].items():
        if not choice["plugin"]:
            raise StackFileError(f"{path}: stages.{stage}.plugin: missing")
    stages = {k: StageChoice.model_validate(v) for k, v in data["stages"].items()}
    try:
        return compose(data["name"], data["description"], stages)
    except StageError as err:
        raise StackFileError(f"{path}: {err}") from None


@lru_cache(maxsize=256)
def _load(path: Path, mtime_ns: int) -> StackConfig:
    return read_stack_file(path)


def load_stack(ref: str) -> StackConfig:
    """A shipped stack by name, or a stack file by path (see the module docstring)."""
    path = _path_of(ref).resolve()
    return _load(path, path.stat().st_mtime_ns)


class StackLibrary:
    """The shipped stacks, and files by path, behind the registry interface the bench uses."""

    family = "stack"

    def names(self) -> list[str]:
        return stack_names()

    def check(self, ref: str) -> None:
        _path_of(ref)

    def create(self, ref: str) -> StackConfig:
        return load_stack(ref)


STACKS = StackLibrary()


def stack(ref: str, policy_options: Mapping[str, Any] | None = None) -> StackConfig:
    """The stack `ref` with `policy_options` merged into its global policy's options (one
    experiment's setting, e.g. {"grouping": {"delta": 8}})."""
    base = load_stack(ref)
    return base.with_policy_options(policy_options) if policy_options else base
