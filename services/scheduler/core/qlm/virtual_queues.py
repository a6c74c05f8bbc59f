"""Virtual queues (QLM §4): one ordered list of request-group references per serving instance.

The global queue (the Grouper) owns the requests; a virtual queue only names groups, so a plan from
the global scheduler replaces the order wholesale without copying or losing any request, and an
instance that disappears hands its group ids back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


class VirtualQueues:
    def __init__(self, instances: Iterable[str] = ()) -> None:
        self._order: dict[str, list[str]] = {name: [] for name in instances}
        self._where: dict[str, str] = {}

    # ---- queries ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return list(self._order)

    def order(self, instance: str) -> list[str]:
        """Group ids of `instance`'s queue, head first (a copy)."""
        return list(self._order[instance])

    def as_mapping(self) -> dict[str, list[str]]:
        return {name: list(ids) for name, ids in self._order.items()}

    def queue_of(self, group_id: str) -> str | None:
        return self._where.get(group_id)

    def position(self, group_id: str) -> int:
        """0-based position of the group in its queue (ValueError when unplaced)."""
        q = self._where.get(group_id)
        if q is None:
            raise ValueError(f"group '{group_id}' is in no virtual queue")
        return self._order[q].index(group_id)

    def __contains__(self, group_id: object) -> bool:
        return group_id in self._where

    # ---- changes --------------------------------------------------------------------------------
    def add_instance(self, instance: str) -> None:
        self._order.setdefault(instance, [])

    def insert(self, instance: str, group_id: str, position: int | None = None) -> None:
        """Put a group on `instance`'s queue (at the tail by default). A group is in one queue."""
        if group_id in self._where:
            raise ValueError(f"group '{group_id}' is already in queue '{self._where[group_id]}'")
        q = self._order[instance]
        q.insert(len(q) if position is None else position, group_id)
        self._where[group_id] = instance

    def remove(self, group_id: str) -> None:
        q = self._where.pop(group_id, None)
        if q is not None:
            self._order[q].remove(group_id)

    def replace(self, order: Mapping[str, Sequence[str]]) -> int:
        """Adopt a plan's order. Returns how many groups changed queue or position."""
        before = {g: (q, i) for q, ids in self._order.items() for i, g in enumerate(ids)}
        for name in order:
            if name not in self._order:
                raise ValueError(f"plan names unknown virtual queue '{name}'")
        self._order = {name: list(order.get(name, ())) for name in self._order}
        self._where = {g: q for q, ids in self._order.items() for g in ids}
        after = {g: (q, i) for q, ids in self._order.items() for i, g in enumerate(ids)}
        return sum(1 for g, at in after.items() if before.get(g) != at)

    def drop_instance(self, instance: str) -> list[str]:
        """Remove an instance's queue (it failed or left); its groups go back to the caller."""
        ids = self._order.pop(instance, [])
        for g in ids:
            self._where.pop(g, None)
        return ids
