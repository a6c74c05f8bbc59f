"""Locust load test of the OpenAI endpoint: streaming requests with a mix of SLO classes.

Each request streams a chat completion carrying its class in `slo`; TTFT and TPOT are measured
client-side from the SSE stream and reported to Locust as custom entries ("ttft <class>",
"tpot <class>"); at the end, SLO attainment per class is printed (and written as JSON when
SLOMESH_LOCUST_OUT is set). Headless run against `slomesh up` (see README):

    .venv/bin/locust -f loadtest/locustfile.py --headless -u 8 -r 4 -t 60s \\
        --host http://127.0.0.1:8000 --model tiny-llama --slo-mix interactive:0.7,batch-1:0.3
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import defaultdict
from typing import Any

from locust import HttpUser, between, events, task

from services.ingress.core.slo import SLOPolicy

_results: dict[str, list[dict[str, Any]]] = defaultdict(list)
_CLASSES = SLOPolicy().classes
_PROMPTS = [
    "Summarise the benefits of queue management for LLM serving.",
    "Write a haiku about deadlines.",
    "Explain continuous batching to a new engineer.",
    "List three ways to reduce time to first token.",
]


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--model", default="tiny-llama", help="served model name")
    parser.add_argument(
        "--slo-mix",
        default="interactive:0.7,batch-1:0.3",
        help="class:weight,... (classes of the ingress's SLO policy)",
    )
    parser.add_argument("--max-tokens", type=int, default=32, help="max_tokens per request")
    parser.add_argument(
        "--class-max-tokens",
        default="",
        help="class:max_tokens,... overriding --max-tokens per class (e.g. tight:8,batch-2:256)",
    )


def _mix(text: str, allow_empty: bool = False) -> tuple[list[str], list[float], dict[str, float]]:
    """Parse "class:value,..." (value default 1); classes must be the ingress's."""
    names, weights = [], []
    for part in text.split(",") if (text or not allow_empty) else []:
        name, _, w = part.partition(":")
        if name not in _CLASSES:
            raise ValueError(f"unknown SLO class '{name}'; valid: {', '.join(_CLASSES)}")
        names.append(name)
        weights.append(float(w or 1))
    return names, weights, dict(zip(names, weights, strict=True))


class ChatUser(HttpUser):
    wait_time = between(0.05, 0.5)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        self.model = opts.model
        self.max_tokens = opts.max_tokens
        self.classes, self.weights, _ = _mix(opts.slo_mix)
        self.class_max_tokens = {
            name: int(n) for name, n in _mix(opts.class_max_tokens, allow_empty=True)[2].items()
        }
        self.rng = random.Random()

    @task
    def chat(self) -> None:
        cls = self.rng.choices(self.classes, self.weights)[0]
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": self.rng.choice(_PROMPTS)}],
            "max_tokens": self.class_max_tokens.get(cls, self.max_tokens),
            "stream": True,
            "slo": cls,
        }
        t0 = time.perf_counter()
        first = last = None
        tokens = 0
        with self.client.post(
            "/v1/chat/completions", json=body, stream=True, catch_response=True, name=f"chat {cls}"
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200]}")
                _results[cls].append({"rejected": True})
                return
            for line in resp.iter_lines():
                if not line.startswith(b"data: {"):
                    continue
                chunk = json.loads(line[6:])
                delta = chunk["choices"][0]["delta"] if chunk.get("choices") else {}
                if delta.get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    tokens += 1
            resp.success()
        if first is None:
            _results[cls].append({"rejected": False, "ttft_s": None})
            return
        ttft = first - t0
        tpot = (last - first) / (tokens - 1) if last and tokens > 1 else 0.0
        self._report(f"ttft {cls}", ttft)
        self._report(f"tpot {cls}", tpot)
        _results[cls].append({"rejected": False, "ttft_s": ttft, "tpot_s": tpot})

    def _report(self, name: str, seconds: float) -> None:
        events.request.fire(
            request_type="SLO",
            name=name,
            response_time=seconds * 1e3,
            response_length=0,
            exception=None,
            context={},
        )


@events.quitting.add_listener
def _summary(environment: Any, **_: Any) -> None:
    report = {}
    for cls, rows in sorted(_results.items()):
        spec = _CLASSES[cls]
        met = sum(
            1
            for r in rows
            if r.get("ttft_s") is not None
            and r["ttft_s"] * 1e3 <= spec.ttft_ms
            and (spec.tpot_ms is None or r["tpot_s"] * 1e3 <= spec.tpot_ms)
        )
        ttft_met = sum(
            1 for r in rows if r.get("ttft_s") is not None and r["ttft_s"] * 1e3 <= spec.ttft_ms
        )
        ttfts = sorted(r["ttft_s"] for r in rows if r.get("ttft_s") is not None)
        tpots = sorted(r["tpot_s"] for r in rows if r.get("tpot_s"))
        tpot_met = sum(1 for t in tpots if spec.tpot_ms is None or t * 1e3 <= spec.tpot_ms)
        report[cls] = {
            "requests": len(rows),
            "slo_attainment": met / len(rows) if rows else 0.0,
            "ttft_attainment": ttft_met / len(rows) if rows else 0.0,
            "ttft_p50_s": ttfts[len(ttfts) // 2] if ttfts else None,
            "ttft_p99_s": ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] if ttfts else None,
            "tpot_p50_s": tpots[len(tpots) // 2] if tpots else None,
            "tpot_p99_s": tpots[min(len(tpots) - 1, int(0.99 * len(tpots)))] if tpots else None,
            "tpot_attainment_served": tpot_met / len(tpots) if tpots else None,
            "rejected": sum(1 for r in rows if r.get("rejected")),
        }
        print(
            f"SLO attainment {cls}: {report[cls]['slo_attainment']:.1%} "
            f"(TTFT {report[cls]['ttft_attainment']:.1%}) "
            f"of {len(rows)} requests ({report[cls]['rejected']} rejected)"
        )
    out = os.environ.get("SLOMESH_LOCUST_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=2)
