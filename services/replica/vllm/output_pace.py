"""How many of a stream's tokens vLLM gathers into one output: vLLM's own `stream_interval`,
set per request from the replica's message interval and the time per token measured here.

vLLM's front end does its per-output work for every output of every request: a
`RequestOutput`, a wake-up of the request's serving task, a response model, its JSON and a
server-sent event, all in the process the control plane shares the cores with. The replica then
sends a stream's tokens after the first in at most one message per `stream_interval_ms`
(response_pieces.py), so outputs of one token each are regrouped anyway. vLLM's
`SamplingParams.stream_interval` (its `--stream-interval`, per request) makes the output
processor itself send a request's first token at once, then one output per that many tokens,
and the end at once; the text, token ids and logprobs are the same, in fewer pieces.

`OutputPace` measures the time per token from the outputs it sees (the time between two outputs
of one request over the tokens the later one carries, smoothed over requests) and
`tokens_per_output` turns a time budget into a token count: the tokens that fit in
`batch_s` at the measured pace, at least 1 (one token per output, vLLM's default, while nothing
is measured or when the budget is 0) and at most `max_tokens`. With `batch_s` at most the
replica's message interval, a token waits in vLLM at most about that budget longer than it
waited in the replica's regrouping before; time to first token and the time from first to last
token do not change.
"""

from __future__ import annotations

import math

MAX_TOKENS_PER_OUTPUT = 64
"""The most tokens one output gathers, whatever the pace (a stalled measurement or a very fast
engine never makes an output wait for more)."""


def tokens_per_output(
    batch_s: float, token_s: float, max_tokens: int = MAX_TOKENS_PER_OUTPUT
) -> int:
    """The tokens that fit in `batch_s` at `token_s` per token, in [1, max_tokens]; 1 when
    either is not positive (nothing measured, or no batching wanted)."""
    if batch_s <= 0 or token_s <= 0 or not math.isfinite(token_s):
        return 1
    return max(1, min(max_tokens, int(batch_s / token_s)))


class OutputPace:
    """The time per output token of this engine's streams, smoothed (module docstring)."""

    def __init__(self, batch_s: float = 0.0, smoothing: float = 0.1) -> None:
        self.batch_s = batch_s
        """The time one output may gather a stream's tokens over, seconds (0: one token per
        output)."""
        self.smoothing = smoothing
        """Weight of each new measurement in the running mean."""
        self.token_s = 0.0
        """The measured time per output token, seconds (0: none measured yet)."""

    def observe(self, elapsed_s: float, tokens: int) -> None:
        """`tokens` more tokens of one request came `elapsed_s` after its previous output."""
        if tokens <= 0 or elapsed_s <= 0:
            return
        sample = elapsed_s / tokens
        if self.token_s <= 0:
            self.token_s = sample
        else:
            self.token_s += self.smoothing * (sample - self.token_s)

    def tokens_per_output(self) -> int:
        """vLLM's `stream_interval` for a request starting now."""
        return tokens_per_output(self.batch_s, self.token_s)
