"""Slice-level serving on real vLLM: a request cut into three slices (sliced twice)
returns the same greedy tokens as the same request served whole.

The chain is the live one without Ray: the ingress's `slice_streams` drives the replica
deployment's `Generate` (its slice plan, the "slice" finish and the context ids) on a real
VLLMEngine with the tiny model; a scripted scheduler answers each slice end with the next
replica and slice budget. Prints what each resumed slice cost to start (the re-prefill of
prompt + output so far, with vLLM's prefix cache): a figure, not an assertion.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.ingress.slicing import slice_streams
from shared.rpc.convert import request_to_meta
from shared.rpc.slomesh.v1 import common_pb2, replica_pb2, scheduler_pb2

pytest.importorskip("vllm")

PROMPT = "Hello world, the model serves a request in slices"
MAX_TOKENS = 24
SLICE = 8


@pytest.fixture(scope="module")
def replica(tiny_model_dir: Path, arun: Any) -> Iterator[Any]:
    from services.replica.deployment import ReplicaDeployment

    args = {
        "application": "replica-0",
        "engine": "vllm",
        "model": "tiny",
        "gpu": "cpu",
        "stream_interval_ms": 0,
        "grpc_host": "",  # called in process: no gRPC server of its own (no mesh credential)
        "vllm": {
            "model": str(tiny_model_dir),
            "max_model_len": 512,
            "max_num_seqs": 4,
            "kv_cache_memory_bytes": 32 << 20,
            "temperature": 0.0,
        },
    }

    async def start() -> Any:
        return ReplicaDeployment.func_or_class(args)

    rep = arun(start(), timeout_s=240)
    yield rep
    arun(rep.engine.shutdown())


class _Client:
    """The mesh client as slice_streams uses it: every replica name is the one real replica."""

    def __init__(self, replica: Any) -> None:
        self.replica = replica
        self.calls: list[replica_pb2.ReplicaGenerateRequest] = []

    def stream(self, app: str, service: str, method: str, message: Any, **_: Any) -> Any:
        self.calls.append(message)
        return self.replica.Generate(message)


def _generate(rid: str, make_request: Any) -> replica_pb2.ReplicaGenerateRequest:
    meta = request_to_meta(make_request(rid, MAX_TOKENS, arrival_s=time.time()))
    return replica_pb2.ReplicaGenerateRequest(meta=meta, prompt=PROMPT, temperature=0.0)


async def _collect(chunks: AsyncIterator[replica_pb2.ReplicaChunk]) -> list[Any]:
    out = []
    async for chunk in chunks:
        out.append((chunk, time.perf_counter()))
    await chunks.aclose()  # type: ignore[attr-defined]
    return out


def test_vllm_request_sliced_twice_returns_the_unsliced_greedy_tokens(
    replica: Any, arun: Any, make_request: Any
) -> None:
    # the engine's output token ids, per request id, as the replica's engine produced them
    engine = replica.engine
    produced: dict[str, list[int]] = {}
    generate_orig = engine.generate

    async def recording(request: Any) -> AsyncIterator[Any]:
        async for chunk in generate_orig(request):
            produced.setdefault(request.request.request_id, []).extend(chunk.token_ids)
            yield chunk

    engine.generate = recording
    try:
        whole_client = _Client(replica)
        whole = slice_streams(whole_client, _generate("whole", make_request), {}, 0, None, None)  # type: ignore[arg-type]
        whole_chunks = arun(_collect(whole("replica-0")), timeout_s=120)
        whole_ids = produced.pop("whole")

        admits: list[scheduler_pb2.AdmitRequest] = []

        async def admit_call(message: scheduler_pb2.AdmitRequest) -> Any:
            admits.append(message)
            return scheduler_pb2.AdmitReply(
                admitted=True,
                replica=common_pb2.ReplicaRef(application="replica-0"),
                slice_tokens=SLICE,
            )

        sliced_client = _Client(replica)
        admit = scheduler_pb2.AdmitRequest()
        opener = slice_streams(
            sliced_client,  # type: ignore[arg-type]
            _generate("sliced", make_request),
            {},
            SLICE,
            admit_call,
            admit,
        )
        t0 = time.perf_counter()
        sliced_chunks = arun(_collect(opener("replica-0")), timeout_s=120)
        sliced_ids = produced.pop("sliced")
    finally:
        engine.generate = generate_orig

    assert len(whole_ids) == MAX_TOKENS
    assert sliced_ids == whole_ids  # greedy tokens unchanged by two slice ends
    # three Generate calls: the first with the prompt, the next two from the context ids
    calls = sliced_client.calls
    assert [c.slice_tokens for c in calls] == [SLICE, SLICE, SLICE]
    assert [c.prior_output_tokens for c in calls] == [0, SLICE, 2 * SLICE]
    assert len(calls[1].context_token_ids) == len(calls[2].context_token_ids) - SLICE
    assert list(calls[2].context_token_ids)[-2 * SLICE :] == whole_ids[: 2 * SLICE]
    assert [a.resume_output_tokens for a in admits] == [SLICE, 2 * SLICE]
    # the client's stream: one accept marker, cumulative counts, one end, never "slice"
    finals = [c for c, _ in sliced_chunks if c.finished]
    assert len(finals) == 1 and finals[0].finish_reason == "length"
    assert finals[0].output_tokens == MAX_TOKENS
    counts = [c.output_tokens for c, _ in sliced_chunks]
    assert counts == sorted(counts)
    assert whole_chunks[-1][0].output_tokens == MAX_TOKENS
    # figures: time from the end of one slice to the next slice's first token
    gaps = [
        t - t_prev
        for (prev, t_prev), (nxt, t) in itertools.pairwise(sliced_chunks)
        if prev.output_tokens in (SLICE, 2 * SLICE) and nxt.output_tokens > prev.output_tokens
    ]
    steps = [
        t - t_prev
        for (prev, t_prev), (nxt, t) in itertools.pairwise(whole_chunks)
        if prev.output_tokens > 0 and nxt.output_tokens > prev.output_tokens
    ]
    print(
        f"\nsliced request: {time.perf_counter() - t0:.3f} s for {MAX_TOKENS} tokens in "
        f"{len(calls)} slices; resume gaps (slice end -> next token) "
        f"{', '.join(f'{g * 1e3:.1f} ms' for g in gaps)}; unsliced median step "
        f"{sorted(steps)[len(steps) // 2] * 1e3:.1f} ms"
    )
