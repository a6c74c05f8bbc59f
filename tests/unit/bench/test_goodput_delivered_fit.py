"""The decode step the live mesh delivered, fitted from vLLM's per-request results, and the
simulator's profile calibrated with it. Nothing is launched."""

from __future__ import annotations

from pathlib import Path

from shared.profiles.io import load_profiles
from slomesh.bench.goodput.confusion import Offered
from slomesh.bench.goodput.delivered_fit import fit_decode_line, stream_batches
from slomesh.bench.goodput.sim import calibrate

PROFILE = (
    Path(__file__).resolve().parents[3] / "deploy" / "ray" / "profiles" / "cpu-tiny-llama.json"
)


def groups(intercept: float, per: float, batches: list[int], out: int = 65) -> list[Offered]:
    """`b` requests streaming together for each b, far apart: each streams in a batch of b."""
    reqs = []
    for k, b in enumerate(batches):
        tpot = intercept + per * b
        reqs += [Offered(100.0 * k, 32, out, "served", 0.01, tpot) for _ in range(b)]
    return reqs


def test_each_stream_reads_the_batch_it_streamed_in() -> None:
    reqs = groups(0.002, 0.001, [1, 3])
    assert [round(b, 6) for b in stream_batches(reqs, 1)] == [1.0, 3.0, 3.0, 3.0]
    assert [round(b, 6) for b in stream_batches(reqs, 2)] == [0.5, 1.5, 1.5, 1.5]


def test_the_line_through_the_delivered_steps_is_recovered() -> None:
    line = fit_decode_line(
        {10.0: groups(0.002, 0.0005, [1, 2, 4]), 20.0: groups(0.002, 0.0005, [8, 16])}, 1
    )
    assert line is not None and line.points == 31
    assert abs(line.intercept_s - 0.002) < 1e-6 and abs(line.per_request_s - 0.0005) < 1e-7
    assert abs(line.per_offered_s) < 1e-9 and abs(line.step_s(10) - 0.007) < 1e-6


def test_the_work_of_the_requests_offered_slows_every_step() -> None:
    # the same batches at 10 and 40 req/s offered; each step 30 us slower per request/s
    line = fit_decode_line(
        {
            10.0: groups(0.002 + 10 * 3e-5, 0.0005, [1, 4, 8]),
            40.0: groups(0.002 + 40 * 3e-5, 0.0005, [2, 8, 16]),
        },
        1,
    )
    assert line is not None and abs(line.per_offered_s - 3e-5) < 1e-9
    assert abs(line.intercept_s - 0.002) < 1e-7 and abs(line.per_request_s - 0.0005) < 1e-8
    assert abs(line.step_s(8, 40.0) - (0.002 + 0.004 + 0.0012)) < 1e-7


def test_rejections_are_not_points_and_one_batch_fits_no_line() -> None:
    rejected = [Offered(0.0, 32, 65, "rejected") for _ in range(5)]
    assert fit_decode_line({5.0: groups(0.002, 0.001, [3]) + rejected}, 1) is None


def test_a_stall_at_one_batch_moves_the_line_little() -> None:
    clean = groups(0.002, 0.0005, [1, 2, 4, 8, 8])
    # one stream of the last batch of 8 at twice its time per token: half of it alone
    stalled = [*clean[:-1], Offered(clean[-1].arrival_s, 32, 65, "served", 0.01, 0.012)]
    line = fit_decode_line({5.0: stalled}, 1)
    assert line is not None and abs(line.step_s(8) - 0.006) < 1e-6


def test_per_token_steps_are_the_groups_time_over_its_tokens() -> None:
    # batch 2: a 65-token stream at 3 ms and a 17-token one at 12 ms per token, both 192 ms
    # long: the median reads 7.5 ms, the group streamed 80 tokens in 384 ms of streams
    pair = [
        Offered(100.0, 32, 65, "served", 0.01, 0.003),
        Offered(100.0, 32, 17, "served", 0.01, 0.012),
    ]
    reqs = groups(0.002, 0.0005, [1]) + pair
    per_token = fit_decode_line({5.0: reqs}, 1, "per-token")
    median = fit_decode_line({5.0: reqs}, 1)
    assert per_token is not None and median is not None
    assert abs(per_token.step_s(2) - 0.384 / 80) < 1e-9
    assert median.step_s(2) > per_token.step_s(2) + 2e-3  # the 12 ms stream's median
    # where every stream of a group has one time per token, both read the same line
    clean = groups(0.002, 0.0005, [1, 2, 4, 8])
    same = fit_decode_line({5.0: clean}, 1, "per-token")
    assert same is not None and abs(same.step_s(8) - 0.006) < 1e-9


def test_the_calibrated_profile_steps_on_the_line() -> None:
    prof = load_profiles(PROFILE)[0]
    reqs = groups(0.002, 0.0005, [1, 2, 4])
    line = fit_decode_line({5.0: reqs}, 1)
    cal = calibrate(prof, reqs, 1, 16, line, 5.0)
    assert abs(cal.decode_time_s(100, 1) - 0.0025) < 1e-6
    assert abs(cal.decode_time_s(100, 16) - 0.010) < 1e-6
    assert cal.prefill_time_s(1, 128) != prof.prefill_time_s(1, 128)
    assert "per request in the batch" in cal.source
