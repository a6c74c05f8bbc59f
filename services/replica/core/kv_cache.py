"""Paged KV cache accounting: GPU blocks of `block_size` tokens, plus a host swap space.

Block identities do not matter to timing or capacity, so the pool counts blocks per sequence;
the invariant `used <= total` is checked on every allocation.
"""

from __future__ import annotations

from services.replica.core.sequence import Sequence


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


class BlockPool:
    """GPU KV blocks of one instance for its active model."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"kv num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.used = 0

    @property
    def free(self) -> int:
        return self.num_blocks - self.used

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def extra_blocks(self, seq: Sequence, tokens: int) -> int:
        """Blocks `seq` needs beyond what it holds to store `tokens` tokens of KV."""
        return max(0, blocks_for(tokens, self.block_size) - seq.gpu_blocks)

    def can_hold(self, seq: Sequence, tokens: int) -> bool:
        return self.extra_blocks(seq, tokens) <= self.free

    def grow(self, seq: Sequence, tokens: int) -> None:
        extra = self.extra_blocks(seq, tokens)
        if extra > self.free:
            raise RuntimeError(f"KV overflow: {seq.request_id} needs {extra}, {self.free} free")
        seq.gpu_blocks += extra
        self.used += extra

    def release(self, seq: Sequence) -> None:
        self.used -= seq.gpu_blocks
        seq.gpu_blocks = 0
        assert self.used >= 0


class HostSwapSpace:
    """CPU memory reserved for swapped-out KV (vLLM's swap_space), in bytes."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0

    def can_hold(self, nbytes: int) -> bool:
        return self.used_bytes + nbytes <= self.capacity_bytes

    def hold(self, nbytes: int) -> None:
        if not self.can_hold(nbytes):
            raise RuntimeError("host swap space overflow")
        self.used_bytes += nbytes

    def release(self, nbytes: int) -> None:
        self.used_bytes -= nbytes
        assert self.used_bytes >= 0
