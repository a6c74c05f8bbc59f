"""The replica's accept: the first chunk of a Generate stream tells the caller the replica has
the request. On a replica whose vLLM application is up, the response's first message is the
accept when it comes within a message interval (no empty marker of its own); else an empty
chunk (or the status and headers alone) goes out by then. A replica still building its
application sends the empty marker at once."""

from __future__ import annotations

import asyncio
import json
import time

from services.replica.asgi_call import Exchange
from services.replica.deployment import ReplicaDeployment
from services.replica.response_pieces import Piece, pieces
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2
from tests.unit.replica.simulated_replica import SIMULATED_REPLICA_ARGS
from tests.unit.replica.test_replica_response_pieces import _Streamer


async def _pieces(app: _Streamer, accept_s: float) -> list[Piece]:
    exchange = Exchange(app, "POST", "/v1/chat/completions", [], b"{}")
    t0 = time.monotonic()  # the shared clock's first tick is a whole interval away
    clock = lambda: time.monotonic() - t0  # noqa: E731
    try:
        return [
            p
            async for p in pieces(
                exchange, lambda: app.tokens, 60.0, 60.0, clock=clock, accept_s=accept_s
            )
        ]
    finally:
        await exchange.close()


def test_the_first_message_goes_within_accept_s_whatever_it_carries() -> None:
    late = _Streamer([(1, b"role;", 0.3), (1, b"t1;", 0.0)])  # the first token after 0.3 s
    out = asyncio.run(_pieces(late, accept_s=0.02))
    assert out[0].start is not None and out[0].body == b"" and not out[0].last
    assert b"".join(p.body for p in out) == b"role;t1;"
    assert [p.start is not None for p in out].count(True) == 1

    soon = _Streamer([(1, b"role;", 0.0), (1, b"t1;", 0.0)])
    out = asyncio.run(_pieces(soon, accept_s=30.0))
    assert out[0].start is not None and out[0].body.startswith(b"role;")


ARGS = SIMULATED_REPLICA_ARGS


def _generate(rid: str) -> replica_pb2.ReplicaGenerateRequest:
    meta = common_pb2.RequestMeta(
        request_id=rid,
        model="llama-3.1-8b",
        input_tokens=8,
        max_tokens=3,
        arrival_unix_s=time.time(),
        slo=common_pb2.Slo(ttft_slo_ms=60_000, class_name="batch-1"),
    )
    body = {"model": "llama-3.1-8b", "prompt": "hello", "max_tokens": 3, "stream": True}
    http = replica_pb2.HttpCall(
        method="POST",
        path="/v1/completions",
        headers=[replica_pb2.Header(name="content-type", value="application/json")],
        body=json.dumps(body).encode(),
    )
    return replica_pb2.ReplicaGenerateRequest(meta=meta, http=http, ignore_eos=True)


def test_a_ready_replica_answers_with_no_marker_of_its_own() -> None:
    async def main() -> tuple[list[replica_pb2.ReplicaChunk], list[replica_pb2.ReplicaChunk]]:
        replica = ReplicaDeployment.func_or_class(dict(ARGS, stream_interval_ms=60_000.0))
        cold = [c async for c in replica.Generate(_generate("r1"))]  # builds the application
        warm = [c async for c in replica.Generate(_generate("r2"))]
        return cold, warm

    cold, warm = asyncio.run(main())
    marker = cold[0]
    assert not (marker.http_status or marker.body or marker.output_tokens or marker.finished)
    assert cold[1].http_status == 200
    assert warm[0].http_status == 200 and warm[0].body.startswith(b"data: ")
    for chunks in (cold, warm):
        assert chunks[-1].finished and chunks[-1].output_tokens == 3
        assert b"data: [DONE]" in b"".join(c.body for c in chunks)
