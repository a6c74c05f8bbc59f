"""Serving stacks as files: one YAML file per stack names a plugin for each stage (library/).

`load_stack(NAME|PATH)` reads one (files.py), `compose.py` resolves its stages (stages.py) into
the `StackConfig` the simulator and the live mesh run (config.py); `live.py` applies a stack to
a Serve config, refusing what the live mesh cannot run. See README.md.
"""

from slomesh.stacks.config import StackConfig, StageChoice, deep_merge
from slomesh.stacks.files import STACKS, StackFileError, load_stack, stack, stack_names

__all__ = [
    "STACKS",
    "StackConfig",
    "StackFileError",
    "StageChoice",
    "deep_merge",
    "load_stack",
    "stack",
    "stack_names",
]
