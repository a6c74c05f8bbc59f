"""A credit placement's seat comes back to the ingress when the request finishes (fast_path.py,
core/credits.py `refill`): only for a request placed on a credit, on the replica it was placed
on (not one re-admitted elsewhere after its replica was lost), while the grant lives."""

from __future__ import annotations

import asyncio

import pytest

from services.ingress.fast_path import FastPath
from shared.rpc.slomesh.v1 import common_pb2, scheduler_pb2


class _Scheduler:
    """Answers every Sync with one credit on replica-1 (a cumulative limit of 1)."""

    async def call(self, application: str, kind: str, method: str, message: object) -> object:
        ref = common_pb2.ReplicaRef(application="replica-1", gpu="cpu", model="m")
        credit = scheduler_pb2.ReplicaCredit(replica=ref, limit=1)
        return scheduler_pb2.LeaseGrant(epoch="e", credits=[credit], ttl_s=60.0)


async def _noop() -> None:
    return None


@pytest.mark.parametrize(
    ("reported_on", "refilled"),
    [
        ("replica-1", True),  # finished where it was placed: its seat serves the next request
        ("replica-0", False),  # re-admitted elsewhere (full path): that seat is not this grant's
        ("", False),  # ended before any replica had it
    ],
)
def test_a_finished_credit_placement_refills_its_seat(reported_on: str, refilled: bool) -> None:
    async def main() -> tuple[bool, bool]:
        scheduler = _Scheduler()
        fast = FastPath(lambda: scheduler)  # type: ignore[arg-type, return-value]
        fast.refresh()  # the first grant
        for _ in range(100):  # the outbox's task sends the empty Sync
            if fast.ledger.epoch:
                break
            await asyncio.sleep(0)
        replica = fast.take("m")
        assert replica is not None and replica.application == "replica-1"
        meta = common_pb2.RequestMeta(request_id="r1", model="m")
        fast.notify(meta, _noop(), replica)
        await fast.outbox.drained()  # the placement is told; the grant that answers has none left
        spent = fast.take("m") is None
        report = scheduler_pb2.CompletionReport(
            meta=meta, replica=common_pb2.ReplicaRef(application=reported_on, model="m")
        )
        fast.report(report)
        again = fast.take("m") is not None  # before the report's Sync answers
        fast.first_token("r1")
        return spent, again

    spent, again = asyncio.run(main())
    assert spent
    assert again is refilled
