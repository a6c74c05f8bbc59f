"""Queue policies of the engine, registered by name (one registry for this family)."""

from __future__ import annotations

from services.replica.core.queue_policies.base import QueuePolicy
from services.replica.core.queue_policies.edf import EDFPolicy
from services.replica.core.queue_policies.fcfs import FCFSPolicy
from services.replica.core.queue_policies.oracle_edf import OracleEDFPolicy
from services.replica.core.queue_policies.priority import PriorityPolicy
from shared.policy import Registry

QUEUE_POLICIES: Registry[QueuePolicy] = Registry(
    "queue policy",
    {
        FCFSPolicy.name: FCFSPolicy,
        PriorityPolicy.name: PriorityPolicy,
        EDFPolicy.name: EDFPolicy,
        OracleEDFPolicy.name: OracleEDFPolicy,
    },
)

__all__ = ["QUEUE_POLICIES", "QueuePolicy"]
