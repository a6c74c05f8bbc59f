"""Typed configuration of the batch-forming global policy (SCLS, UELLM, FIFO baselines)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class BatchingConfig(BaseModel):
    """How the pool is split into batches, where batches go, and how often."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    former: str = "scls-dp"
    """Batch former, a name from BATCH_FORMERS (scls-dp, slo-odbs, fifo, ...)."""
    placer: str = "max-min"
    """Batch placer, a name from BATCH_PLACERS (max-min, least-loaded, round-robin)."""
    slice_iterations: int | None = Field(128, ge=1)
    """Decode iterations per slice (SCLS S = 128); None: run each batch to its longest predicted
    output (UELLM). Unfinished requests return to the pool either way."""
    interval_lambda: float = Field(0.5, gt=0, le=1)
    """SCLS λ: the next batches are formed after λ·(least instance load) seconds."""
    min_interval_s: float = Field(3.0, gt=0)
    """SCLS Γ: the shortest interval between batch formations (the paper uses 3-6 s)."""
    memory_fraction: float = Field(0.9, gt=0, le=1)
    """ζ: share of the KV capacity a batch may plan to use."""
    max_batch_size: int = Field(256, ge=1)
    """Engine cap on requests per batch."""
    fifo_batch_size: int = Field(16, ge=1)
    """Batch size of the FIFO former (the fixed-size baseline)."""
    max_padding_waste: float = Field(0.5, ge=0, le=1)
    """slo-odbs (derived): most decode slots a batch may waste on members that finish early."""
    odbs_lost_last: bool = False
    """slo-odbs (derived): walk requests that can still finish in time (alone) first, in SLO
    order, and the lost ones after them, so under overload lost work does not open the batches
    that savable work then waits behind (derived_odbs.py)."""
    odbs_slack_limit: bool = True
    """slo-odbs (derived): rule (b), a batch may not grow past the smallest remaining slack of
    its savable members. Off: batches are bounded by memory and padding waste only."""
    reform_on_slice_end: bool = False
    """Continuous engines (the live mesh): a request whose slice ended is batched again at once
    instead of at the next interval: its stream has started, and waiting for the interval is a
    gap between two of its tokens (a TPOT miss). Static engines end a whole batch together."""
    lengths: Literal["predicted", "true", "hints"] = "predicted"
    """Output lengths the formers see: the online predictor's mean, the true ones (oracle), or
    `hints`: each request's length hint (the live mesh: the ingress's prediction), a uniform prior
    on [0, max_tokens] without one (no predictor needed)."""
