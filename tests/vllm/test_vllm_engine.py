"""VLLMEngine on the real vLLM CPU engine and the tiny random-weight model.

One engine serves the whole module (vLLM takes ~20 s to start on 2 cores). It runs with the
slomesh scheduler hook (queue policy "edf") and max_num_seqs=2, so the same engine also shows
the hook reordering vLLM's waiting queue. The tiny model never emits EOS under greedy decoding,
so every request that is not stopped runs to max_tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.replica.engine import EngineRequest, TokenChunk
from shared.domain import Request
from tests.vllm.conftest import tiny_engine

pytest.importorskip("vllm")

PROMPT = "Hello world, the model serves a request"


@pytest.fixture(scope="module")
def engine(tiny_model_dir: Path, arun: Any) -> Iterator[Any]:
    yield from tiny_engine(tiny_model_dir, arun, queue_policy="edf")


@pytest.fixture
def req(engine: Any, make_request: Callable[..., Request]) -> Callable[..., EngineRequest]:
    """An EngineRequest arriving now on the engine's clock."""

    def make(rid: str, max_tokens: int, **kw: Any) -> EngineRequest:
        prompt = kw.pop("prompt", PROMPT)
        return EngineRequest(
            make_request(rid, max_tokens, arrival_s=engine.clock.now(), **kw), prompt
        )

    return make


async def collect(engine: Any, request: EngineRequest) -> list[TokenChunk]:
    return [c async for c in engine.generate(request)]


def check_stream(chunks: list[TokenChunk], max_tokens: int, reason: str = "length") -> None:
    counts = [c.num_output_tokens for c in chunks]
    assert counts == sorted(counts) and counts[-1] == sum(len(c.token_ids) for c in chunks)
    assert all(c.token_ids for c in chunks[:-1])  # every non-final chunk brings tokens
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].finish_reason == reason
    assert chunks[-1].num_output_tokens <= max_tokens


def test_streaming_generate_counts_up_to_max_tokens(engine: Any, arun: Any, req: Any) -> None:
    chunks = arun(collect(engine, req("stream", 12)))
    check_stream(chunks, 12)
    assert chunks[-1].num_output_tokens == 12  # no EOS from the tiny model: "length"
    assert "".join(c.text for c in chunks).strip()
    assert [c.time_s for c in chunks] == sorted(c.time_s for c in chunks)
    status = engine.status()
    assert (status.waiting, status.running, status.evicted) == (0, 0, 0)
    assert status.active_model == "tiny" and status.kv_total_blocks > 0
    assert engine.num_unfinished_vllm_requests() == 0


def test_max_tokens_respected(engine: Any, arun: Any, req: Any) -> None:
    chunks = arun(collect(engine, req("short", 3)))
    check_stream(chunks, 3)
    assert chunks[-1].num_output_tokens == 3


def test_token_ids_prompt_and_duplicate_id(engine: Any, arun: Any, req: Any) -> None:
    ids = engine.llm.get_tokenizer().encode(PROMPT)
    request = EngineRequest(req("ids", 4).request, prompt_token_ids=ids)
    by_ids = arun(collect(engine, request))
    by_text = arun(collect(engine, req("text", 4)))
    assert [t for c in by_ids for t in c.token_ids] == [t for c in by_text for t in c.token_ids]

    async def duplicate() -> None:
        first = engine.generate(req("dup", 50))
        await first.__anext__()
        try:
            with pytest.raises(ValueError, match="already"):
                await engine.generate(req("dup", 5)).__anext__()
        finally:
            await first.aclose()

    arun(duplicate())


def test_closing_stream_early_frees_the_request(engine: Any, arun: Any, req: Any) -> None:
    async def scenario() -> tuple[int, list[int]]:
        stream = engine.generate(req("early", 400))
        got = [await stream.__anext__() for _ in range(3)]
        await stream.aclose()
        assert 3 <= got[-1].num_output_tokens < 400  # a chunk may carry several tokens
        left = engine.num_unfinished_vllm_requests()
        running_seen = []  # vLLM's running count after each step that sent "after-early" a chunk
        async for _chunk in engine.generate(req("after-early", 32)):
            if engine.stats.latest is not None:
                running_seen.append(engine.stats.latest.running)
        return left, running_seen

    left, running_seen = arun(scenario())
    assert left == 0
    # vLLM's scheduler no longer runs "early" beside the next request (on a loaded host the
    # front end may take several steps' tokens as one chunk, so only the bound is certain)
    assert running_seen and max(running_seen) <= 1
    assert engine.status().running == 0


def test_abort_sends_final_abort_chunk(engine: Any, arun: Any, req: Any) -> None:
    async def scenario() -> list[TokenChunk]:
        chunks: list[TokenChunk] = []
        stream = engine.generate(req("abort-me", 400))
        async for chunk in stream:
            chunks.append(chunk)
            if len(chunks) == 2:
                await engine.abort("abort-me")
        return chunks

    chunks = arun(scenario())
    last = chunks[-1]
    assert last.finished and last.finish_reason == "abort" and last.token_ids == []
    assert 2 <= last.num_output_tokens < 400
    assert engine.num_unfinished_vllm_requests() == 0
    arun(engine.abort("abort-me"))  # unknown by now: a no-op


def test_two_concurrent_requests_complete(engine: Any, arun: Any, req: Any) -> None:
    async def both() -> list[list[TokenChunk]]:
        return list(
            await asyncio.gather(collect(engine, req("c1", 10)), collect(engine, req("c2", 7)))
        )

    first, second = arun(both())
    check_stream(first, 10)
    check_stream(second, 7)
    assert (first[-1].num_output_tokens, second[-1].num_output_tokens) == (10, 7)


TOKENS = 200
"""The evicted request's output length."""


def test_evict_then_resume_completes_the_request(engine: Any, arun: Any, req: Any) -> None:
    # long enough that the request is still running when the evict reaches the engine, 5 chunks
    # in, however fast the host streams the rest
    reference = arun(collect(engine, req("ref", TOKENS)))

    async def scenario() -> tuple[list[TokenChunk], list[str], list[str], int, int]:
        chunks: list[TokenChunk] = []
        evicted_at = asyncio.Event()

        async def consume() -> None:
            async for chunk in engine.generate(req("evictee", TOKENS)):
                chunks.append(chunk)
                if len(chunks) == 5:
                    evicted_at.set()

        task = asyncio.create_task(consume())
        await evicted_at.wait()
        evicted = await engine.evict(["evictee", "nobody"])
        during = engine.status().evicted
        n_before = len(chunks)
        await asyncio.sleep(0.3)  # nothing streams while evicted
        assert len(chunks) == n_before
        resumed = await engine.resume(["evictee", "nobody"])
        await task
        return chunks, evicted, resumed, during, n_before

    chunks, evicted, resumed, during, n_before = arun(scenario())
    assert evicted == ["evictee"] and resumed == ["evictee"] and during == 1
    check_stream(chunks, TOKENS)
    assert chunks[-1].num_output_tokens == TOKENS and n_before < TOKENS
    # greedy decoding resumed from prompt + generated token ids continues the same sequence
    tokens = [t for c in chunks for t in c.token_ids]
    assert tokens == [t for c in reference for t in c.token_ids]
    assert engine.status().evicted == 0


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    """Poll `condition` on the event loop (the engine's outputs arrive meanwhile)."""
    try:
        async with asyncio.timeout(timeout_s):
            while not condition():
                await asyncio.sleep(0.002)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for: {what}") from None


def test_edf_hook_admits_the_earlier_deadline_first(engine: Any, arun: Any, req: Any) -> None:
    """Both slots (max_num_seqs=2) are held by blockers; B (loose deadline) is queued before C
    (tight deadline); then exactly one slot is freed. EDF admits C into it, FCFS would admit B.

    The test orders every event itself instead of relying on timing: B and C are queued one
    after the other, each confirmed by vLLM's own scheduler stats (waiting 1, then 2, behind 2
    running); one blocker is aborted; the other is held until C has finished, then aborted too.
    The blockers could only end early by decoding ~490 tokens meanwhile (checked below).
    """
    events: list[tuple[str, str]] = []  # ("first" | "done", request id), in the order seen

    async def consume(request: EngineRequest) -> TokenChunk:
        rid = request.request.request_id
        last: TokenChunk | None = None
        async for chunk in engine.generate(request):
            if chunk.token_ids and ("first", rid) not in events:
                events.append(("first", rid))
            last = chunk
        events.append(("done", rid))
        assert last is not None
        return last

    def vllm_queue(waiting: int) -> bool:
        snap = engine.stats.latest
        return snap is not None and (snap.running, snap.waiting) == (2, waiting)

    async def scenario() -> dict[str, TokenChunk]:
        tasks: dict[str, asyncio.Task[TokenChunk]] = {}

        def start(rid: str, max_tokens: int, ttft_deadline_s: float) -> None:
            r = req(rid, max_tokens, ttft_deadline_s=ttft_deadline_s)
            tasks[rid] = asyncio.create_task(consume(r))

        for rid in ("blocker-1", "blocker-2"):  # the longest the context allows
            start(rid, 490, ttft_deadline_s=1.0)
        await until(lambda: ("first", "blocker-2") in events, "blocker-2 running")
        await until(lambda: vllm_queue(waiting=0), "both blockers running in vLLM")
        start("B-loose", 5, ttft_deadline_s=100.0)
        await until(lambda: vllm_queue(waiting=1), "B queued in vLLM")
        start("C-tight", 5, ttft_deadline_s=2.0)
        await until(lambda: vllm_queue(waiting=2), "B and C queued in vLLM")
        await engine.abort("blocker-1")  # one slot frees: the hook picks C or B for it
        await tasks["C-tight"]
        await engine.abort("blocker-2")  # now B
        return {rid: await task for rid, task in tasks.items()}

    last = arun(scenario())
    assert last["blocker-1"].finish_reason == last["blocker-2"].finish_reason == "abort"
    assert last["B-loose"].num_output_tokens == last["C-tight"].num_output_tokens == 5
    firsts = [rid for kind, rid in events if kind == "first"]
    assert firsts.index("C-tight") < firsts.index("B-loose"), events
    # C was admitted alone into the freed slot: B only started once C was done
    assert events.index(("done", "C-tight")) < events.index(("first", "B-loose")), events


def test_invalid_request_raises_in_the_consumer(engine: Any, arun: Any, req: Any) -> None:
    too_long = EngineRequest(req("too-long", 4).request, prompt_token_ids=[100] * 600)
    from services.replica.vllm.engine import InvalidRequestError

    with pytest.raises(InvalidRequestError, match="maximum context length is 512"):
        arun(collect(engine, too_long))
    assert engine.status().running == 0 and engine.num_unfinished_vllm_requests() == 0
    check_stream(arun(collect(engine, req("too-long", 3))), 3)  # the id is free again
