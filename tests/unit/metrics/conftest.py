"""A tiny hand-computed run shared by the metrics and report tests.

Run clock: start 0 s, end 10 s (duration 10 s), wall 1.5 s. Two instances, six requests:

  id  class inst arr  first fin  out ttft tpot          e2e  ttft/tpot/e2e target  met?
  r1  chat  i0   0.0  0.5   2.5  11  0.5  2.0/10 = 0.2  2.5  1.0 / 0.25 / -       yes
  r2  chat  i0   1.0  3.0   4.0   5  2.0  1.0/4 = 0.25  3.0  1.0 / 0.25 / -       no (TTFT)
  r3  batch i1   2.0  2.5   8.0  12  0.5  5.5/11 = 0.5  6.0  1.0 / 0.1  / -       no (TPOT)
  r4  batch -    3.0  -     -     8  rejected            1.0 / 0.1  / -       no
  r5  batch i1   5.0  6.0   -     9  unfinished          2.0 / 0.1  / -       no
  r6  batch i1   4.0  5.0   5.0   1  1.0  0 (1 token)   1.0  1.0 / 0.1  / 1.0     yes (at limits)

Instances: i0 busy 6 s, kv 0.5, evictions 1, swaps 2, last finish 4.0 (r2), 2 finished;
           i1 busy 4 s, kv 0.3, evictions 2, swaps 0, last finish 8.0 (r3), 2 finished.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from shared.metrics.records import InstanceStats, RequestRecord, RunResult
from shared.metrics.summary import StackSummary, summarize


def rec(
    rid: str,
    cls: str,
    inst: str | None,
    arrival: float,
    first: float | None,
    finish: float | None,
    out: int,
    ttft_dl: float,
    tpot_t: float | None,
    e2e_dl: float | None = None,
    rejected: bool = False,
) -> RequestRecord:
    """A RequestRecord with fixed model/tenant/input size."""
    return RequestRecord(
        request_id=rid,
        model="m",
        class_name=cls,
        tenant="t",
        instance=inst,
        arrival_s=arrival,
        input_tokens=100,
        output_tokens=out,
        first_token_s=first,
        finish_s=finish,
        ttft_deadline_s=ttft_dl,
        tpot_target_s=tpot_t,
        e2e_deadline_s=e2e_dl,
        rejected=rejected,
        reject_reason="queue full" if rejected else "",
    )


def hand_run(stack: str = "fcfs") -> RunResult:
    records = [
        rec("r1", "chat", "i0", 0.0, 0.5, 2.5, 11, 1.0, 0.25),
        rec("r2", "chat", "i0", 1.0, 3.0, 4.0, 5, 1.0, 0.25),
        rec("r3", "batch", "i1", 2.0, 2.5, 8.0, 12, 1.0, 0.1),
        rec("r4", "batch", None, 3.0, None, None, 8, 1.0, 0.1, rejected=True),
        rec("r5", "batch", "i1", 5.0, 6.0, None, 9, 2.0, 0.1),
        rec("r6", "batch", "i1", 4.0, 5.0, 5.0, 1, 1.0, 0.1, e2e_dl=1.0),
    ]
    instances = [
        InstanceStats("i0", "H100", 6.0, 0.5, 1, 2, 4.0, 2),
        InstanceStats("i1", "H100", 4.0, 0.3, 2, 0, 8.0, 2),
    ]
    return RunResult(stack, records, instances, start_s=0.0, end_s=10.0, wall_s=1.5)


RecFactory = Callable[..., RequestRecord]
RunFactory = Callable[..., RunResult]


@pytest.fixture
def make_rec() -> RecFactory:
    """The `rec` builder, for tests that need their own records."""
    return rec


@pytest.fixture
def make_run() -> RunFactory:
    """The `hand_run` builder (optionally under another stack name)."""
    return hand_run


@pytest.fixture
def run() -> RunResult:
    return hand_run()


@pytest.fixture
def summary(run: RunResult) -> StackSummary:
    return summarize(run)


@pytest.fixture
def two_summaries() -> list[StackSummary]:
    """The hand run under two stack names; the second one has a third class and no finishes."""
    other = hand_run("scorpio")
    unfinished = [
        rec("x1", "bulk", None, 1.0, None, None, 4, 1.0, None, rejected=True),
    ]
    empty = RunResult("qlm", unfinished, [], start_s=0.0, end_s=10.0, wall_s=0.2)
    return [summarize(hand_run("fcfs")), summarize(other), summarize(empty)]
