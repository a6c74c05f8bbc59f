"""CPU per request of the ingress -> replica stream, three ways, on this host's grpc.aio.

No mesh: a server process and this client exchange the replica's own messages
(`ReplicaGenerateRequest`, `ReplicaChunk` with an SSE body) over loopback, `--concurrency`
closed-loop requests at a time, `--messages` response messages per request, `--pace-ms`
between a request's messages (the replica's stream interval; 0: back to back):

- `call`: one server-streaming call per request (a `Replica.Generate` call each);
- `mux`: one long-lived bidirectional stream per client-server pair carrying every request
  (messages tagged with the request id), one gRPC message per request message;
- `coalesced`: the same stream, every message that is ready when the sender runs goes out in
  one gRPC message (length-prefixed inside a `ReplicaChunk.body`), both ways: what the mesh's
  `Replica.Streams` does (shared/rpc/replica_streams.py, services/replica/stream_mux.py).

It prints each side's CPU seconds per request (user + system, the warm-up left out):

    .venv/bin/python loadtest/grpc_stream_cost.py --modes call,mux,coalesced --pace-ms 10
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import grpc

from shared.rpc.slomesh.v1 import common_pb2, replica_pb2

BODY = (
    b'{"model":"tiny-llama","messages":[{"role":"user","content":"measure the first token and '
    b'every token after it"}],"max_tokens":32,"stream":true}'
)
PIECE = (
    b'data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"tiny-llama",'
    b'"choices":[{"index":0,"delta":{"content":" a b c"},"logprobs":null,"finish_reason":null}]}'
    b"\n\n"
) * 3
METADATA = [("slomesh-mesh-token", "x" * 32), ("traceparent", "00-" + "1" * 32 + "-" + "2" * 16)]
Request = replica_pb2.ReplicaGenerateRequest
Chunk = replica_pb2.ReplicaChunk


def cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def pack(items: Iterable[bytes]) -> bytes:
    return b"".join(len(b).to_bytes(4, "little") + b for b in items)


def unpack(data: bytes) -> Iterator[bytes]:
    i = 0
    while i < len(data):
        n = int.from_bytes(data[i : i + 4], "little")
        yield data[i + 4 : i + 4 + n]
        i += 4 + n


def request(i: int) -> Any:
    meta = common_pb2.RequestMeta(request_id=f"{i:016x}", model="tiny-llama", max_tokens=32)
    header = replica_pb2.Header(name="content-type", value="application/json")
    call = replica_pb2.HttpCall(method="POST", path="/v1/chat/completions", headers=[header])
    call.body = BODY
    return Request(meta=meta, http=call)


class Server:
    def __init__(self, messages: int, pace_s: float) -> None:
        self.messages, self.pace_s = messages, pace_s

    async def chunks(self, rid: str) -> AsyncIterator[Any]:
        for i in range(self.messages):
            last = i == self.messages - 1
            yield Chunk(request_id=rid, body=PIECE, output_tokens=i + 1, finished=last)
            if not last:
                await asyncio.sleep(self.pace_s)

    async def call(self, req: Any, _: Any) -> AsyncIterator[Any]:
        async for c in self.chunks(req.meta.request_id):
            yield c

    async def stream(self, incoming: AsyncIterator[Any], coalesce: bool) -> AsyncIterator[Any]:
        out: asyncio.Queue[Any] = asyncio.Queue()
        tasks: set[asyncio.Task[None]] = set()

        async def one(req: Any) -> None:
            async for c in self.chunks(req.meta.request_id):
                out.put_nowait(c)

        async def read() -> None:
            async for msg in incoming:
                reqs = [Request.FromString(r) for r in unpack(msg.body)] if coalesce else [msg]
                for req in reqs:
                    task = asyncio.ensure_future(one(req))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
            out.put_nowait(None)

        reader = asyncio.ensure_future(read())
        while (first := await out.get()) is not None:
            if not coalesce:
                yield first
                continue
            batch = [first]
            while not out.empty() and (nxt := out.get_nowait()) is not None:
                batch.append(nxt)
            yield Chunk(body=pack(c.SerializeToString() for c in batch))
        await reader

    async def mux(self, incoming: AsyncIterator[Any], _: Any) -> AsyncIterator[Any]:
        async for c in self.stream(incoming, False):
            yield c

    async def coalesced(self, incoming: AsyncIterator[Any], _: Any) -> AsyncIterator[Any]:
        async for c in self.stream(incoming, True):
            yield c


async def serve(port: int, messages: int, pace_s: float) -> None:
    """The server process: answers CPU-seconds queries on stdin (one per line) until EOF."""
    s = Server(messages, pace_s)
    codec = {
        "request_deserializer": Request.FromString,
        "response_serializer": Chunk.SerializeToString,
    }
    raw = {"request_deserializer": Chunk.FromString, "response_serializer": Chunk.SerializeToString}
    handlers = grpc.method_handlers_generic_handler(
        "bench.Stream",
        {
            "Call": grpc.unary_stream_rpc_method_handler(s.call, **codec),
            "Mux": grpc.stream_stream_rpc_method_handler(s.mux, **codec),
            "Coalesced": grpc.stream_stream_rpc_method_handler(s.coalesced, **raw),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        print(f"{cpu_s():.6f}", flush=True)
    await server.stop(None)


async def run_client(port: int, mode: str, args: argparse.Namespace, server_cpu: Any) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    ids = iter(range(10**9))
    waiting: dict[str, asyncio.Queue[Any]] = {}
    send: asyncio.Queue[Any] = asyncio.Queue()
    coalesce = mode == "coalesced"
    if mode == "call":
        method = channel.unary_stream(
            "/bench.Stream/Call",
            request_serializer=Request.SerializeToString,
            response_deserializer=Chunk.FromString,
        )
    else:

        async def outgoing() -> AsyncIterator[Any]:
            while True:
                batch = [await send.get()]
                while coalesce and not send.empty():
                    batch.append(send.get_nowait())
                yield (
                    Chunk(body=pack(r.SerializeToString() for r in batch)) if coalesce else batch[0]
                )

        stream = channel.stream_stream(
            "/bench.Stream/Coalesced" if coalesce else "/bench.Stream/Mux",
            request_serializer=(Chunk if coalesce else Request).SerializeToString,
            response_deserializer=Chunk.FromString,
        )(outgoing(), metadata=METADATA)

        async def demux() -> None:
            async for msg in stream:
                inner = [Chunk.FromString(r) for r in unpack(msg.body)] if coalesce else [msg]
                for c in inner:
                    waiting[c.request_id].put_nowait(c)

        demuxer = asyncio.ensure_future(demux())

    async def worker(n: int) -> None:
        for _ in range(n):
            req = request(next(ids))
            if mode == "call":
                async for _chunk in method(req, metadata=METADATA):
                    pass
                continue
            q: asyncio.Queue[Any] = asyncio.Queue()
            waiting[req.meta.request_id] = q
            send.put_nowait(req)
            while not (await q.get()).finished:
                pass
            del waiting[req.meta.request_id]

    c = args.concurrency
    await asyncio.gather(*(worker(args.warmup // c) for _ in range(c)))
    s0, c0, t0 = server_cpu(), cpu_s(), time.perf_counter()
    await asyncio.gather(*(worker(args.requests // c) for _ in range(c)))
    client, wall, server = cpu_s() - c0, time.perf_counter() - t0, server_cpu() - s0
    n = args.requests // c * c
    print(
        f"{mode:9s} {n} requests x {args.messages} messages, pace {args.pace_ms:g} ms: "
        f"client {client / n * 1e3:.3f} ms/request, server {server / n * 1e3:.3f} ms/request, "
        f"wall {wall:.1f} s",
        flush=True,
    )
    if mode != "call":
        demuxer.cancel()
    await channel.close(None)


async def main(args: argparse.Namespace) -> None:
    cmd = [sys.executable, __file__, "--serve", str(args.port), "--messages", str(args.messages)]
    cmd += ["--pace-ms", str(args.pace_ms)]
    srv = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert srv.stdin is not None and srv.stdout is not None
    if srv.stdout.readline().strip() != "ready":
        raise SystemExit("the server did not start")

    def server_cpu() -> float:
        assert srv.stdin is not None and srv.stdout is not None
        srv.stdin.write("\n")
        srv.stdin.flush()
        return float(srv.stdout.readline())

    try:
        for mode in args.modes.split(","):
            await run_client(args.port, mode.strip(), args, server_cpu)
    finally:
        srv.stdin.close()
        srv.wait(timeout=30)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--modes", default="call,mux,coalesced", help="any of call,mux,coalesced")
    p.add_argument("--requests", type=int, default=2000, help="measured requests per mode")
    p.add_argument("--warmup", type=int, default=400, help="requests before the measurement")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    p.add_argument("--messages", type=int, default=4, help="response messages per request")
    p.add_argument("--pace-ms", type=float, default=10.0, help="between a request's messages")
    p.add_argument("--port", type=int, default=50917, help="the server's loopback port")
    p.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    import uvloop  # the event loop Ray Serve's replicas run

    uvloop.install()
    parsed = parse()
    if parsed.serve:
        asyncio.run(serve(parsed.serve, parsed.messages, parsed.pace_ms / 1e3))
    else:
        asyncio.run(main(parsed))
