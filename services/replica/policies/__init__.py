"""Queue policies of the engine, registered by name (one registry for this family)."""

from __future__ import annotations

from services.replica.policies.base import QueuePolicy
from services.replica.policies.edf import EDFPolicy
from services.replica.policies.fcfs import FCFSPolicy
from services.replica.policies.oracle_edf import OracleEDFPolicy
from services.replica.policies.priority import PriorityPolicy
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
