"""The slice budget the ingress serves a placement with.

A batching policy's placement offers a slice budget (`AdmitReply.slice_tokens`: the replica
generates at most that many tokens, then the request rejoins the batch pool; slicing.py follows
it from slice to slice). An OpenAI call declines it and is served whole on the replica it was
placed on: vLLM's serving state for the call (logprobs, stop strings, seeded samples, grammars)
lives in that replica's front end and does not move with the tokens. Every call the ingress
serves is an OpenAI call, so the budget served is 0 (no slice), whatever is offered.

The simulator runs the same rule where it stands for the live ingress (slomesh/sim/ingress.py):
a batch's members then run whole on their engine.
"""

from __future__ import annotations


def served_slice_tokens(offered_tokens: int) -> int:
    """The slice budget an OpenAI call is served with when its placement offers
    `offered_tokens` (0: no slice): 0, the call runs whole (module docstring)."""
    if offered_tokens < 0:
        raise ValueError(f"offered_tokens must be >= 0, got {offered_tokens}")
    return 0
