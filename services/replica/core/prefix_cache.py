"""The simulated engine's automatic prefix cache (vLLM's APC, modelled at block granularity).

vLLM keeps every full KV block it computed, keyed by the chained hash of the prompt up to that
block (shared/domain/prefix.py), and hands it to a later request whose prompt starts the same
way; freed blocks stay cached until an allocation needs them, oldest use first (LRU). Here:
- a new request's leading blocks found in the cache are counted computed at once, so it
  prefills only the uncached suffix (at least its last prompt token);
- when a request's prompt is fully computed its blocks enter the cache (most recent use), and
  when it finishes, the blocks of prompt + reply (`completion_block_hashes`: a next turn that
  re-sends this reply finds it cached, as vLLM caches generated tokens' full blocks);
- the cache holds at most the engine's KV capacity in blocks and drops the least recently used
  beyond that.
Simplifications (documented in services/replica/README.md): a hit's blocks are still charged
to the request's own KV allocation (no sharing of memory between requests, so memory use is
as without caching: conservative), a reply's blocks enter the cache when the request finishes
(not as each fills), and blocks held by running requests count against the same LRU capacity as
free cached ones.
"""

from __future__ import annotations

from collections import OrderedDict

from shared.domain import Request
from shared.domain.prefix import cacheable_tokens


class PrefixCache:
    """LRU set of block hashes, at most `capacity_blocks`, with hit counters."""

    def __init__(self, capacity_blocks: int) -> None:
        if capacity_blocks < 0:
            raise ValueError(f"prefix cache capacity_blocks must be >= 0, got {capacity_blocks}")
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.hit_tokens = 0
        """Prompt tokens served from the cache so far."""
        self.prompt_tokens = 0
        """Prompt tokens of the requests looked up so far."""

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, request: Request) -> int:
        """Prompt tokens of `request` already cached (its leading blocks; the matched blocks
        become most recently used). Counted in the hit rate."""
        self.prompt_tokens += request.input_tokens
        prefix = request.prefix
        if prefix is None:
            return 0
        matched = 0
        for h in prefix.block_hashes:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            matched += 1
        hit = cacheable_tokens(prefix, matched, request.input_tokens)
        self.hit_tokens += hit
        return hit

    def insert(self, request: Request, finished: bool = False) -> None:
        """`request`'s prompt is computed (finished: the request is done, and its reply's
        blocks are known too): its full blocks are cached (most recent use)."""
        prefix = request.prefix
        if prefix is None or self.capacity_blocks == 0:
            return
        hashes = (finished and prefix.completion_block_hashes) or prefix.block_hashes
        for h in hashes:
            if h in self._blocks:
                self._blocks.move_to_end(h)
            else:
                self._blocks[h] = None
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        """Forget every block (the KV pool was rebuilt for another model)."""
        self._blocks.clear()

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
