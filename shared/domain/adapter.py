"""LoRA adapters of a served model, as configuration (`AdapterSpec`).

A model entry lists its adapters; clients name an adapter as the request's `model` (vLLM's
convention) and the request runs on the base model with the adapter applied. The spec is
what every layer needs: the ingress (names clients may use, `/v1/models`), the scheduler
(which adapter a request needs) and the replica (where to load it from).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")


class AdapterSpec(BaseModel):
    """One LoRA adapter of a base model."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """The name clients put in `model` to use this adapter (vLLM's `lora_name`): letters,
    digits and `._:/-`, at most 128 characters, unique among the mesh's models and adapters."""
    path: str
    """Local directory in PEFT format (`adapter_config.json` + `adapter_model.safetensors`),
    the `lora_path` vLLM loads; a leading `~` is the user's home."""
    rank: int = Field(8, ge=1, le=512)
    """LoRA rank r of the adapter (the replica's `max_lora_rank` must be at least the largest
    rank it serves); for a `random_weights` adapter, the rank it is built with."""
    random_weights: bool = False
    """A test artefact: when `path` holds no adapter, `slomesh up` (and `slomesh
    build-tiny-adapter`) builds one there with random weights drawn from `seed` over the base
    model's shapes. False: the adapter must exist (a trained one); nothing is ever downloaded."""
    seed: int = Field(0, ge=0)
    """Seed of a `random_weights` adapter's weights (different seeds, different adapters)."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError(
                "adapter name must start with a letter or digit and hold only letters, digits "
                f"and ._:/- (at most 128 characters), got {name!r}"
            )
        return name

    @property
    def local_path(self) -> str:
        """`path` with `~` expanded."""
        return os.path.expanduser(self.path)


def check_unique_names(models: Sequence[str], adapters: Sequence[AdapterSpec]) -> None:
    """Raise ValueError naming the first adapter whose name repeats a model's or another
    adapter's (a client's `model` must name exactly one thing)."""
    seen = set(models)
    for adapter in adapters:
        if adapter.name in seen:
            raise ValueError(
                f"adapters: name {adapter.name!r} is already a model or adapter name "
                "(every name clients use must be unique)"
            )
        seen.add(adapter.name)
