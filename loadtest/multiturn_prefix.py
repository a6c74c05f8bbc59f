"""Multi-turn conversations against a running mesh: mean TTFT with and without prefix affinity.

Each of --conversations conversations shares one of --system-prompts system prompts and runs
--turns turns in sequence, each re-sending the whole history (system prompt, earlier messages
and replies) as chat APIs do; conversations run concurrently. TTFT is the time to the first
streamed content chunk. Run it once per stack (`slomesh up --stack slomesh` vs
`--stack slomesh-no-prefix`; vLLM's prefix caching is on in both) and compare:

    .venv/bin/python loadtest/multiturn_prefix.py --host http://127.0.0.1:8000 \
        --model tiny-llama --out runs/multiturn-slomesh.json

Prompts are seeded text (no data set needed); every run with the same seed sends the same
conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path

import httpx

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
    "river",
    "mountain",
    "cloud",
    "signal",
    "vector",
    "kernel",
    "cache",
    "block",
    "token",
    "stream",
    "replica",
    "queue",
    "budget",
    "slack",
    "deadline",
    "tenant",
    "prefix",
    "history",
]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


async def turn(
    client: httpx.AsyncClient, model: str, messages: list[dict[str, str]], max_tokens: int
) -> tuple[float | None, str]:
    body = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "stream": True,
        "slo": "interactive",
    }
    start = time.perf_counter()
    first: float | None = None
    reply: list[str] = []
    async with client.stream("POST", "/v1/chat/completions", json=body) as resp:
        if resp.status_code != 200:
            await resp.aread()
            return None, ""
        async for line in resp.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            delta = (chunk.get("choices") or [{}])[0].get("delta", {}).get("content")
            if delta:
                if first is None:
                    first = time.perf_counter() - start
                reply.append(delta)
    return first, "".join(reply)


async def conversation(
    client: httpx.AsyncClient, args: argparse.Namespace, k: int, out: list[dict[str, object]]
) -> None:
    rng = random.Random(args.seed * 1000 + k)
    system = text(random.Random(args.seed * 1000 - 1 - k % args.system_prompts), args.system_words)
    messages = [{"role": "system", "content": system}]
    for t in range(args.turns):
        messages.append({"role": "user", "content": text(rng, args.user_words)})
        ttft, reply = await turn(client, args.model, messages, args.max_tokens)
        out.append({"conversation": k, "turn": t, "ttft_s": ttft})
        messages.append({"role": "assistant", "content": reply or "ok"})


def summary(rows: list[dict[str, object]]) -> dict[str, object]:
    ok = [float(r["ttft_s"]) for r in rows if r["ttft_s"] is not None]  # type: ignore[arg-type]
    later = [
        float(r["ttft_s"])  # type: ignore[arg-type]
        for r in rows
        if r["ttft_s"] is not None and int(r["turn"]) > 0  # type: ignore[call-overload]
    ]
    return {
        "requests": len(rows),
        "failed": len(rows) - len(ok),
        "ttft_mean_s": statistics.fmean(ok) if ok else None,
        "ttft_p50_s": statistics.median(ok) if ok else None,
        "ttft_mean_later_turns_s": statistics.fmean(later) if later else None,
    }


async def main_async(args: argparse.Namespace) -> dict[str, object]:
    rows: list[dict[str, object]] = []
    async with httpx.AsyncClient(base_url=args.host, timeout=120.0) as client:
        await asyncio.gather(
            *(conversation(client, args, k, rows) for k in range(args.conversations))
        )
    return {"args": vars(args), "summary": summary(rows), "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--host", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--conversations", type=int, default=8)
    p.add_argument("--turns", type=int, default=4)  # 6 overflows a 2,048-token context
    p.add_argument("--system-prompts", type=int, default=2)
    p.add_argument("--system-words", type=int, default=300)
    p.add_argument("--user-words", type=int, default=60)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    result = asyncio.run(main_async(args))
    print(json.dumps(result["summary"], indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
