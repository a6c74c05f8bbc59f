"""SCORPIO's step hook keeps vLLM 0.32's two running caps together (no engine needed).

vLLM 0.32 admits waiting requests while running < max_num_active_reqs and asserts running <=
max_num_running_reqs after the step; the hook lowers the cap for credit batching and VBS, so it
must lower both for the call and restore both after it (the engine core died on that assertion
live, `slomesh bench-live --stacks slomesh`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("vllm")

from services.replica.vllm.scorpio_hook import ScorpioStep
from shared.domain.scorpio import ScorpioConfig


@dataclass
class _Req:
    request_id: str
    stp_s: float
    num_output_tokens: int = 3
    num_tokens: int = 13
    num_computed_tokens: int = 12  # decoding: exactly its next token to compute
    sampling_params: Any = None

    def __post_init__(self) -> None:
        self.sampling_params = SimpleNamespace(
            extra_args={"slomesh": {"tpot_target_s": self.stp_s}}
        )


@dataclass
class _Scheduler:
    running: list[_Req]
    waiting: list[_Req] = field(default_factory=list)
    max_num_running_reqs: int = 4
    max_num_active_reqs: int = 4


@pytest.mark.parametrize(
    "stps",
    [
        [0.01, 1.0, 1.0, 1.0],  # one tight request: the loose ones skip decodes
        [0.02, 0.02, 0.5, 0.5],
        [0.05, 0.05, 0.05, 0.05],  # equal: nobody is held back
    ],
)
def test_scorpio_step_lowers_and_restores_both_caps(stps: list[float]) -> None:
    step = ScorpioStep(ScorpioConfig(credit_batching=True, vbs_admission=False), None)
    sched = _Scheduler([_Req(f"r{k}", s) for k, s in enumerate(stps)])
    seen: list[tuple[int, int, int]] = []

    def base() -> None:
        seen.append((len(sched.running), sched.max_num_running_reqs, sched.max_num_active_reqs))

    for _ in range(6):
        step.run(sched, base)
        assert (sched.max_num_running_reqs, sched.max_num_active_reqs) == (4, 4)
        assert len(sched.running) == len(stps)
    # during each call, admission (active cap) never exceeds what the assertion allows
    assert all(active <= running_cap for _, running_cap, active in seen)
    assert all(n <= running_cap for n, running_cap, _ in seen)
    if len(set(stps)) > 1:
        assert step.skipped_decodes > 0 and any(active < 4 for *_, active in seen)


@pytest.mark.parametrize(
    ("free", "waiting_stps", "admitted"),
    [
        # tau(N) = 0.02·N + 0.01 s; without a TPOT SLO a request counts at default_tpot_s 0.2 s
        (False, [0.0] * 8, 6),  # 1.3·tau(N) <= 0.198 for N <= 7 (one already running)
        (True, [0.0] * 8, 8),  # no TPOT SLO anywhere: nothing to guard
        # a TPOT SLO (0.1 s) joins: guarded from then on, the others at TRP 0.5, so
        # VBS = 1 + 0.5·(N - 1) <= 3.31 holds for N <= 5 in all
        (True, [0.0, 0.0, 0.1, 0.0, 0.0], 4),
    ],
)
def test_vbs_untargeted_free_caps_only_batches_with_a_tpot_slo(free, waiting_stps, admitted):
    from shared.domain.profile import DecodeCoeffs

    config = ScorpioConfig(credit_batching=False, vbs_untargeted_free=free)
    step = ScorpioStep(config, DecodeCoeffs(0.0, 0.02, 0.0, 0.01))
    # _Req's stp 0.0 stands for "no TPOT SLO" (_stp_s falls back to default_tpot_s)
    sched = _Scheduler(
        [_Req("run", 0.0)],
        [_Req(f"w{k}", s) for k, s in enumerate(waiting_stps)],
        max_num_running_reqs=16,
        max_num_active_reqs=16,
    )
    caps: list[int] = []
    step.run(sched, lambda: caps.append(sched.max_num_running_reqs))
    assert caps == [1 + admitted]
