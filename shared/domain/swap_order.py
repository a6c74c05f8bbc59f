"""The scheduler's swap order on one engine (a ModelSwap `load`), as the simulated engine
(services/replica/core/scheduler_state.py), the live replica's model host
(services/replica/model_host.py) and the scheduler's books of a replica
(services/scheduler/core/live_view.py) all follow it.

An engine holds at most one order: the model the scheduler last told it to swap to. A later
order replaces one not yet carried out, and an order back to the active model cancels it (the
scheduler changed its mind before the swap began: no swap there and back). The order is carried
out once no request of the active model runs on the engine and the queue's head wants the
ordered model or the queue is empty: the requests placed before the order and those of the
active model placed while it waits run first, and a head that wants a third model swaps the
engine to that model first (loading the ordered one then would serve nothing: the head blocks
every request behind it), the order still standing. Once the ordered model is loaded (or failed
to load), whichever way, the order is done.
"""

from __future__ import annotations


def swap_due(
    ordered: str | None, active: str | None, running: bool, head_model: str | None
) -> str | None:
    """The ordered model to load now, None: no ordered swap is due. `ordered`: the order's
    model (None: no order); `running`: a request of the active model runs; `head_model`: the
    model of the queue's head (None: the queue is empty). A head for the active model runs
    first; a head for a third model swaps the engine to its own model first (the caller's
    head-of-line swap)."""
    if ordered is None or running or ordered == active:
        return None
    if head_model is not None and head_model != ordered:
        return None
    return ordered


class SwapOrder:
    def __init__(self) -> None:
        self.target: str | None = None
        """The model ordered and not yet loaded; None: no order (swaps follow the queue head)."""

    def order(self, model: str, active: str | None) -> None:
        """The scheduler's order to swap to `model` while `active` is the engine's model."""
        self.target = None if model == active else model

    def due(self, active: str | None, running: bool, head_model: str | None) -> str | None:
        """The model to load now (`swap_due` with this order); None: no ordered swap is due."""
        return swap_due(self.target, active, running, head_model)

    def done(self, model: str) -> None:
        """`model` was loaded (it became the engine's active model) or failed to load."""
        if self.target == model:
            self.target = None
