"""The prompt's block-aligned prefix hashes, computed where the prompt is seen (the ingress).

The scheduler never sees prompt text; it gets these hashes (RequestMeta.prefix_block_hashes)
for prefix-cache-aware placement (services/scheduler/core/prefix_affinity.py):
- with the model's tokenizer: chained hashes of each full block of `block_size_tokens` token ids,
  as vLLM's prefix cache keys its blocks;
- without one, a stand-in: the rendered prompt's UTF-8 bytes in 4-byte pieces, each piece one
  "token" (the same 4 bytes/token the token-count estimate uses). Two prompts then share block k
  exactly when their first (k+1)·block_size·4 bytes agree, which is what a shared system prompt
  or a re-sent conversation history gives; block boundaries do not match real token boundaries,
  so the predicted cached length is approximate.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from shared.domain import Request
from shared.domain.prefix import DEFAULT_BLOCK_SIZE_TOKENS, PromptPrefix

BYTES_PER_STAND_IN_TOKEN = 4


def prompt_prefix(
    prompt: str,
    token_ids: Sequence[int] | None = None,
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
) -> PromptPrefix | None:
    """The prompt's prefix hashes (None for an empty prompt)."""
    if token_ids is None:
        data = prompt.encode("utf-8")
        step = BYTES_PER_STAND_IN_TOKEN
        token_ids = [
            int.from_bytes(data[i : i + step], "little") for i in range(0, len(data), step)
        ]
    if not token_ids:
        return None
    return PromptPrefix.from_token_ids(token_ids, block_size_tokens)


def with_prompt_prefix(request: Request, prompt: str, tokenizer: Any | None = None) -> Request:
    """`request` carrying its prompt's prefix hashes (token ids from `tokenizer` when given)."""
    if not prompt:
        return request
    ids = list(tokenizer(prompt)["input_ids"]) if tokenizer is not None else None
    return dataclasses.replace(request, prefix=prompt_prefix(prompt, ids))
