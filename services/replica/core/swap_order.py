"""The scheduler's swap order on one engine (a ModelSwap `load`), as the simulated engine
(scheduler_state.py) and the live replica's model host (model_host.py) both carry it out.

An engine holds at most one order: the model the scheduler last told it to swap to. A later
order replaces one not yet carried out, and an order back to the active model cancels it (the
scheduler changed its mind before the swap began: no swap there and back). The order is carried
out once no request of the active model runs on the engine and none heads its queue: the
requests placed before the order, and those of the active model placed while it waits, run
first. Once the ordered model is loaded (or failed to load), whichever way, the order is done.
"""

from __future__ import annotations


class SwapOrder:
    def __init__(self) -> None:
        self.target: str | None = None
        """The model ordered and not yet loaded; None: no order (swaps follow the queue head)."""

    def order(self, model: str, active: str | None) -> None:
        """The scheduler's order to swap to `model` while `active` is the engine's model."""
        self.target = None if model == active else model

    def due(self, active: str | None, running: bool, head_model: str | None) -> str | None:
        """The model to load now: the ordered one once the active model has no request
        `running` and none heading the queue (`head_model`: the queue head's model, None if the
        queue is empty); None: no swap is due."""
        if self.target is None or running:
            return None
        if head_model is not None and head_model == active:
            return None
        return self.target

    def done(self, model: str) -> None:
        """`model` was loaded (it became the engine's active model) or failed to load."""
        if self.target == model:
            self.target = None
