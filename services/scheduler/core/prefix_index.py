"""The scheduler's approximate per-replica prefix index (what each replica's prefix cache holds).

The scheduler never sees the engines' caches, so it keeps its own guess, the way Ray Serve LLM's
PrefixCacheAffinityRouter and llm-d's approximate prefix scorer do: for each replica, the block
hashes (shared/domain/prefix.py) of the prompts placed there, most recently used last. A
placement inserts the request's blocks; a lookup returns how many leading blocks of a prompt a
replica is believed to hold. Each replica's set is bounded by its KV capacity in blocks
(`capacity_blocks`, from the hardware profile) and expires least recently used first, which is
what vLLM's cache does with freed blocks. It is approximate: a replica may have evicted earlier
(its running requests also take KV) or kept a block longer; no engine event corrects it yet.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from shared.domain import Request
from shared.domain.prefix import cacheable_tokens


class PrefixIndex:
    """Per-replica LRU sets of block hashes; pure bookkeeping, no clock."""

    def __init__(self) -> None:
        self._blocks: dict[str, OrderedDict[int, None]] = {}
        self._capacity: dict[str, int] = {}
        self.placed_prompt_tokens = 0
        """Prompt tokens of every placement recorded."""
        self.placed_hit_tokens = 0
        """Of those, the tokens the index predicted cached on the chosen replica."""

    def set_capacity(self, replica: str, capacity_blocks: int) -> None:
        """Bound `replica`'s set to `capacity_blocks` (its KV capacity / block size)."""
        if capacity_blocks < 0:
            raise ValueError(f"capacity_blocks must be >= 0, got {capacity_blocks}")
        self._capacity[replica] = capacity_blocks
        self._blocks.setdefault(replica, OrderedDict())
        self._trim(replica)

    def replicas(self) -> list[str]:
        return list(self._blocks)

    def matched_blocks(self, replica: str, request: Request) -> int:
        """Leading blocks of `request`'s prompt believed cached on `replica` (no LRU update)."""
        prefix = request.prefix
        blocks = self._blocks.get(replica)
        if prefix is None or not blocks:
            return 0
        n = 0
        for h in prefix.block_hashes:
            if h not in blocks:
                break
            n += 1
        return n

    def cached_tokens(self, replica: str, request: Request) -> int:
        """Prompt tokens of `request` a placement on `replica` would not prefill (predicted)."""
        if request.prefix is None:
            return 0
        return cacheable_tokens(
            request.prefix, self.matched_blocks(replica, request), request.input_tokens
        )

    def record_placement(self, replica: str, request: Request) -> None:
        """`request` was placed on `replica`: count its predicted hit, then its blocks become
        the most recently used there (evicting the least recently used beyond capacity)."""
        self.placed_prompt_tokens += request.input_tokens
        self.placed_hit_tokens += self.cached_tokens(replica, request)
        prefix = request.prefix
        if prefix is None:
            return
        blocks = self._blocks.setdefault(replica, OrderedDict())
        for h in prefix.block_hashes:
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        self._trim(replica)

    def record_completion(self, replica: str, request: Request) -> None:
        """`request` finished on `replica`: the blocks of its prompt + reply (when known) are
        believed cached there too (a next turn re-sending the reply matches them)."""
        prefix = request.prefix
        if prefix is None or replica not in self._blocks:
            return
        blocks = self._blocks[replica]
        for h in prefix.completion_block_hashes:
            if h in blocks:
                blocks.move_to_end(h)
            else:
                blocks[h] = None
        self._trim(replica)

    def drop_replica(self, replica: str) -> None:
        """Forget a replica (lost, or its cache was reset)."""
        self._blocks.pop(replica, None)
        self._capacity.pop(replica, None)

    def size(self, replica: str) -> int:
        return len(self._blocks.get(replica, ()))

    def sync(self, replicas: Iterable[tuple[str, int]]) -> None:
        """Make sure every (replica, capacity_blocks) is known (new ones start empty)."""
        for name, cap in replicas:
            if name not in self._capacity:
                self.set_capacity(name, cap)

    @property
    def hit_rate(self) -> float:
        """Predicted prefix hit rate of the placements so far (tokens)."""
        if not self.placed_prompt_tokens:
            return 0.0
        return self.placed_hit_tokens / self.placed_prompt_tokens

    def _trim(self, replica: str) -> None:
        cap = self._capacity.get(replica)
        blocks = self._blocks[replica]
        if cap is None:
            return
        while len(blocks) > cap:
            blocks.popitem(last=False)
