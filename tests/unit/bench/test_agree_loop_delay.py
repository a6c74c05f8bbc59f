"""The ingress loop's delay bench-agree gives the simulated guard: read from the live guard's
rejections of the calibration trace at the measured rate (slomesh/bench/agree/calibrate.py)."""

from __future__ import annotations

import pytest

from shared.metrics.records import RequestRecord
from slomesh.bench.agree.calibrate import loop_delay


def _rec(rid: str, reason: str = "") -> RequestRecord:
    return RequestRecord(
        rid,
        "m",
        "short",
        "t",
        None,
        0.0,
        10,
        0,
        None,
        None,
        2.0,
        None,
        None,
        rejected=bool(reason),
        reject_reason=reason,
    )


def _guard(lag_s: float) -> str:
    return (
        f'HTTP 429: {{"error":{{"message":"predicted TTFT 2.100 s ({lag_s:.3f} s of it the '
        "ingress loop's delay) at 5 requests in flight"
    )


@pytest.mark.parametrize(
    ("by_rate", "rate", "delay_s"),
    [
        ({11.0: [_rec("a"), _rec("b")]}, 11.0, 0.0),  # no rejection: on time
        ({11.0: [_rec("a", "HTTP 429: queue cannot reach it")]}, 11.0, 0.0),  # not the guard's
        (
            {11.0: [_rec("a", _guard(0.1)), _rec("b", _guard(0.3)), _rec("c", _guard(0.2))]},
            11.0,
            0.2,
        ),
        # the trace at the measured rate only, when it ran
        ({8.0: [_rec("a", _guard(0.9))], 11.0: [_rec("b", _guard(0.1))]}, 11.0, 0.1),
        # else every calibration trace's rejections
        ({8.0: [_rec("a", _guard(0.1)), _rec("b", _guard(0.3))]}, 11.0, 0.2),
    ],
)
def test_the_median_delay_the_guards_rejections_name(
    by_rate: dict[float, list[RequestRecord]], rate: float, delay_s: float
) -> None:
    assert loop_delay(by_rate, rate) == pytest.approx(delay_s)
