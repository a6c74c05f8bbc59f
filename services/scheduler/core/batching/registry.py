"""Registries of batch formers and batch placers, built from a BatchingConfig."""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.core.batching.base import BatchFormer
from services.scheduler.core.batching.config import BatchingConfig
from services.scheduler.core.batching.derived_odbs import DerivedODBSFormer
from services.scheduler.core.batching.fifo import FIFOFormer
from services.scheduler.core.batching.placement import (
    BatchPlacer,
    LeastLoadedPlacer,
    MaxMinOffloader,
    RoundRobinPlacer,
)
from services.scheduler.core.batching.scls_dp import SCLSDPFormer
from services.scheduler.core.batching.slo_odbs import SLOODBSFormer, odbs, slo_dbs
from shared.policy import Registry

FormerFactory = Callable[[BatchingConfig], BatchFormer]
PlacerFactory = Callable[[], BatchPlacer]


def _former(build: FormerFactory) -> Callable[[], FormerFactory]:
    return lambda: build


BATCH_FORMERS: Registry[FormerFactory] = Registry(
    "batch former",
    {
        "scls-dp": _former(lambda c: SCLSDPFormer(c.slice_iterations)),
        "fifo": _former(lambda c: FIFOFormer(c.fifo_batch_size, c.slice_iterations)),
        "slo-odbs": _former(
            lambda c: DerivedODBSFormer(
                c.max_padding_waste, c.slice_iterations, c.odbs_lost_last, c.odbs_slack_limit
            )
        ),
        "slo-odbs-paper": _former(
            lambda c: SLOODBSFormer(slice_iterations=c.slice_iterations, name="slo-odbs-paper")
        ),
        "slo-dbs": _former(lambda c: slo_dbs(slice_iterations=c.slice_iterations)),
        "odbs": _former(lambda c: odbs(slice_iterations=c.slice_iterations)),
    },
)

BATCH_PLACERS: Registry[BatchPlacer] = Registry(
    "batch placer",
    {
        "max-min": MaxMinOffloader,
        "least-loaded": LeastLoadedPlacer,
        "round-robin": RoundRobinPlacer,
    },
)
