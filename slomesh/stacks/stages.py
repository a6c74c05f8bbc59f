"""The stages of a serving stack and their plugins: one registry per stage, one factory shape.

Every plugin is built by `create_plugin(stage, name, params)`: the stage's registry looks the name
up and the factory validates `params` (unknown keys fail naming them). A plugin resolves to a
`Fragment` of the running configuration for the scheduler family the stack uses:

- `router`: every request is placed at arrival by a router (orderer `none`, engine batch former);
- `qlm`: QLM's virtual queues hold requests centrally (orderer `qlm`);
- `batching`: a central pool is cut into batches (a cluster batch former such as `scls-dp`).

A plugin that does not apply to the stack's family fails naming its stage. Which plugins exist,
what each does and the equation of each: slomesh/stacks/README.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.policy import Registry
from slomesh.stacks.plugin import FAMILIES, STAGES, Fragment, Plugin, StageError
from slomesh.stacks.plugins import CLUSTER_FORMERS, factories

__all__ = [
    "CLUSTER_FORMERS",
    "FAMILIES",
    "REGISTRIES",
    "STAGES",
    "Fragment",
    "Plugin",
    "StageError",
    "create_plugin",
]


def _registries() -> dict[str, Registry[Plugin]]:
    # each factory takes (name, params): the registry passes the name through
    return {
        stage: Registry(
            f"{stage} plugin",
            {n: (lambda params, _n=n, _f=f: _f(_n, params)) for n, f in named.items()},
        )
        for stage, named in factories().items()
    }


REGISTRIES: dict[str, Registry[Plugin]] = _registries()
"""stage -> its plugin registry; every entry is called as factory(params) for one name."""


def create_plugin(stage: str, name: str, params: Mapping[str, Any] | None = None) -> Plugin:
    """The plugin `name` of `stage` built with `params` (StageError names the stage and key)."""
    if stage not in REGISTRIES:
        raise StageError(f"stages.{stage}: not a stage (valid: {', '.join(STAGES)})")
    try:
        return REGISTRIES[stage].create(name, dict(params or {}))
    except StageError:
        raise
    except ValueError as err:
        raise StageError(f"stages.{stage}.plugin: {err}") from None
