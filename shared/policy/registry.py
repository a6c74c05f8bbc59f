"""A registry of named factories, one instance per policy family.

Policies register themselves with a decorator; configs name them; an unknown name fails at start-up
with the list of valid ones. Factories may take arguments (a config, collaborators): `create`
passes them through, so variants are config handed to one factory, not new entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(ValueError):
    """A config named something no registry entry answers to."""

    def __init__(self, family: str, name: str, valid: list[str]) -> None:
        super().__init__(f"unknown {family} '{name}'; valid: {', '.join(valid)}")
        self.family = family
        self.name = name
        self.valid = valid


class Registry(Generic[T]):
    """Maps names to factories for one family (e.g. "router", "queue policy")."""

    def __init__(self, family: str, factories: dict[str, Callable[..., T]] | None = None) -> None:
        self.family = family
        self._factories: dict[str, Callable[..., T]] = dict(factories or {})

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.family} '{name}' registered twice")
            self._factories[name] = factory
            return factory

        return deco

    def names(self) -> list[str]:
        return sorted(self._factories)

    def check(self, name: str) -> None:
        if name not in self._factories:
            raise UnknownNameError(self.family, name, self.names())

    def create(self, name: str, *args: Any, **kwargs: Any) -> T:
        self.check(name)
        return self._factories[name](*args, **kwargs)
