"""Record the serving engine's own step timings: vLLM's v1 scheduler with a stopwatch.

`StepRecordingScheduler` is vLLM's stock `Scheduler` (FCFS, chunked prefill, its own preemption)
that writes, inside vLLM's engine-core process, one JSON line per event to the file named by the
environment variable SLOMESH_STEP_LOG (read when the scheduler is built):

    {"k": "step", "t0": ..., "t1": ..., "t2": ..., "p": [[chunk, ctx], ...], "d": [ctx, ...]}
    {"k": "add", "id": REQUEST_ID, "t": ...}
    {"k": "first", "id": REQUEST_ID, "t": ...}

Times are `time.perf_counter()` seconds (CLOCK_MONOTONIC on Linux, so they compare with the
client process's). A step runs from t0 (schedule() called) through t1 (model output back,
update_from_output() called) to t2 (outputs built); "p" lists the step's prefill chunks with the
KV context cached before each, "d" the decoding sequences' contexts. "add" is when the engine
core took a request in; "first" is the end of the step that produced a request's first token.
slomesh's profiler fits the simulated engine's step model on these records
(slomesh/profiling/serving_fit.py), so the simulator is timed like the serving engine rather than
like an isolated `step()` call.

Plumbing: `scheduler_cls="services.replica.vllm.step_recorder.StepRecordingScheduler"`. Lines are
buffered and flushed every FLUSH_EVERY events and at shutdown.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, TextIO

from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request

ENV_VAR = "SLOMESH_STEP_LOG"
FLUSH_EVERY = 256


class StepRecordingScheduler(Scheduler):
    """vLLM's scheduler, unchanged, plus a log of each step's shape and wall-clock span."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get(ENV_VAR)
        self._log: TextIO | None = open(path, "a") if path else None  # noqa: SIM115
        self._buf: list[dict[str, Any]] = []
        self._step: dict[str, Any] | None = None
        self._await_first: set[str] = set()

    def _emit(self, event: dict[str, Any]) -> None:
        if self._log is None:
            return
        self._buf.append(event)
        if len(self._buf) >= FLUSH_EVERY:
            self._flush()

    def _flush(self) -> None:
        if self._log is not None and self._buf:
            self._log.write("".join(json.dumps(e) + "\n" for e in self._buf))
            self._log.flush()
            self._buf.clear()

    def add_request(self, request: Request) -> None:
        self._emit({"k": "add", "id": request.request_id, "t": time.perf_counter()})
        self._await_first.add(request.request_id)
        super().add_request(request)

    def schedule(self, *args: Any, **kwargs: Any) -> SchedulerOutput:
        t0 = time.perf_counter()
        out = super().schedule(*args, **kwargs)
        prefill, decode, firsts = [], [], []
        for req_id, n in out.num_scheduled_tokens.items():
            req = self.requests.get(req_id)
            if req is None:
                continue
            before = req.num_computed_tokens - n  # schedule() has already advanced it
            if req.num_output_tokens > 0 and n == 1:
                decode.append(before + 1)
            else:
                prefill.append([n, before])
            if req_id in self._await_first and req.num_computed_tokens >= req.num_prompt_tokens:
                firsts.append(req_id)
        self._step = {"k": "step", "t0": t0, "p": prefill, "d": decode, "first": firsts}
        return out

    def update_from_output(self, scheduler_output: SchedulerOutput, model_runner_output: Any):  # type: ignore[no-untyped-def]
        t1 = time.perf_counter()
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        t2 = time.perf_counter()
        step = self._step
        if step is not None and scheduler_output.num_scheduled_tokens:
            firsts = step.pop("first")
            step["t1"], step["t2"] = t1, t2
            self._emit(step)
            for req_id in firsts:
                self._await_first.discard(req_id)
                self._emit({"k": "first", "id": req_id, "t": t2})
        self._step = None
        return outputs

    def shutdown(self) -> None:
        self._flush()
        if self._log is not None:
            self._log.close()
            self._log = None
        super().shutdown()
