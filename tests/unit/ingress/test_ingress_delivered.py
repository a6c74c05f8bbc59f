"""The ingress's admission on delivered latency (services/ingress/core/delivered.py)."""

from __future__ import annotations

from services.ingress.core.delivered import DeliveredGuard, DeliveredGuardConfig, quantile

M = "tiny"


def fill(guard: DeliveredGuard, load: int, ttft: float, tpot: float, at: float) -> None:
    """Two requests let in at `load` (load - 1 others in flight, which leave no sample)."""
    for i in range(load - 1):
        guard.start(f"bg{at}-{i}", M, 1.0, at)
    for k in range(2):
        guard.start(f"r{at}-{k}", M, 1.0, at)
        guard.first_token(f"r{at}-{k}", at + ttft)
        guard.end(f"r{at}-{k}", 11, at + ttft + 10 * tpot)
    for i in range(load - 1):
        guard.end(f"bg{at}-{i}", 0, at)


def busy(guard: DeliveredGuard, at: float) -> None:
    """One other request in flight (its first token out), so a new one is not alone."""
    guard.start(f"busy{at}", M, 1.0, at)
    guard.first_token(f"busy{at}", at)


def test_quantile_nearest_rank() -> None:
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.9) == 4.0
    assert quantile([5.0], 0.1) == 5.0


def test_no_samples_lets_the_request_in() -> None:
    v = DeliveredGuard().check(M, 1.0, 0.05, 0.0, 0.0)
    assert v.admit and v.ttft_s is None and v.tpot_s is None and v.load == 1


def test_a_load_measured_late_is_rejected_and_a_lower_one_admitted() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=2))
    fill(guard, 4, ttft=0.1, tpot=0.002, at=0.0)  # 4 in flight: fast
    fill(guard, 20, ttft=3.0, tpot=0.002, at=0.2)  # 20 in flight: first tokens after 3 s
    now = 4.0
    for i in range(19):  # 19 others in flight now: the 20th would be let in at load 20
        guard.start(f"busy{i}", M, 1.0, now)
        guard.first_token(f"busy{i}", now)
    late = guard.check(M, 1.0, 0.05, 0.0, now)
    assert not late.admit and late.load == 20
    assert "predicted TTFT" in late.reason and "1 s" in late.reason
    assert late.retry_after_s >= 1.0
    for i in range(16):
        guard.end(f"busy{i}", 0, now)
    fine = guard.check(M, 1.0, 0.05, 0.0, now)
    assert fine.admit and fine.load == 4 and fine.ttft_s is not None and fine.ttft_s < 0.5


def test_the_time_spent_before_admission_counts() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    fill(guard, 2, ttft=0.6, tpot=0.002, at=0.0)
    busy(guard, 1.0)
    assert guard.check(M, 1.0, None, 0.2, 1.0).admit
    assert not guard.check(M, 1.0, None, 0.5, 1.0).admit


def test_a_looser_objective_admits_what_a_tight_one_rejects() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    fill(guard, 2, ttft=2.0, tpot=0.002, at=0.0)
    busy(guard, 3.0)
    assert not guard.check(M, 1.0, None, 0.0, 3.0).admit
    assert guard.check(M, 5.0, None, 0.0, 3.0).admit


def test_a_looser_objectives_samples_never_shut_a_tighter_one_out() -> None:
    """Only samples of the request's objective or a tighter one predict it: a loose class
    queued 9.5 s says nothing of a 2 s request (an EDF engine serves it first), and standing in
    for it would keep the tight class out with no sample of its own to end it."""
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    for k in range(2):
        guard.start(f"loose{k}", M, 10.0, 0.0)
        guard.first_token(f"loose{k}", 9.5)
        guard.end(f"loose{k}", 11, 9.6)
    busy(guard, 10.0)
    assert not guard.check(M, 10.0, None, 0.0, 10.0).admit  # 9.5 s > 10 s x 0.9
    tight = guard.check(M, 2.0, None, 0.0, 10.0)
    assert tight.admit and tight.ttft_s is not None and tight.ttft_s < 1.0  # busy's own
    guard.start("tight", M, 2.0, 10.0)
    guard.first_token("tight", 12.5)
    guard.end("tight", 11, 12.6)
    assert not guard.check(M, 2.0, None, 0.0, 12.6).admit  # now its own sample: 2.5 s


def test_tpot_beyond_the_objective_is_rejected_and_none_means_no_tpot_objective() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    fill(guard, 2, ttft=0.05, tpot=0.08, at=0.0)
    busy(guard, 2.0)
    v = guard.check(M, 1.0, 0.05, 0.0, 2.0)
    assert not v.admit and "time per output token 80.0 ms" in v.reason
    assert guard.check(M, 1.0, None, 0.0, 2.0).admit


def test_samples_are_forgotten_after_the_window() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1, window_s=5.0))
    fill(guard, 2, ttft=3.0, tpot=0.002, at=0.0)
    busy(guard, 4.0)
    assert not guard.check(M, 1.0, None, 0.0, 4.0).admit
    assert guard.check(M, 1.0, None, 0.0, 9.0).admit


def test_a_request_still_without_its_first_token_counts_as_late_for_its_objective() -> None:
    guard = DeliveredGuard()
    guard.start("slow", M, 1.0, 0.0)
    assert guard.check(M, 1.0, None, 0.0, 0.5).admit
    v = guard.check(M, 1.0, None, 0.0, 1.5)
    assert not v.admit and v.ttft_s == 1.5
    assert guard.check(M, 0.5, None, 0.0, 1.5).admit  # a tighter one waiting says nothing
    guard.first_token("slow", 1.6)
    guard.end("slow", 1, 1.6)
    assert guard.in_flight(M) == 0


def test_a_stream_that_never_started_stops_counting() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(stale_after_s=10.0, window_s=1.0))
    guard.start("lost", M, 1.0, 0.0)
    assert guard.in_flight(M) == 1
    v = guard.check(M, 1.0, None, 0.0, 11.0)
    assert v.admit and guard.in_flight(M) == 0


def test_disabled_admits_everything_but_still_predicts() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(enabled=False, min_samples=1))
    fill(guard, 1, ttft=3.0, tpot=0.002, at=0.0)
    v = guard.check(M, 1.0, 0.05, 0.0, 1.0)
    assert v.admit and v.ttft_s == 3.0 and guard.rejected == 0


def test_unknown_ids_are_ignored() -> None:
    guard = DeliveredGuard()
    guard.first_token("nobody", 1.0)
    guard.end("nobody", 5, 2.0)
    assert guard.in_flight(M) == 0


def test_loop_lag_is_the_largest_lateness_of_the_recent_window() -> None:
    import asyncio

    from services.ingress.admission_gate import LoopLag

    now = [0.0]
    late = iter([0.0, 0.3, 0.05, 0.0])

    async def sleep(s: float) -> None:
        now[0] += s + next(late)

    lag = LoopLag(interval_s=0.1, window_s=1.0, clock=lambda: now[0], sleep=sleep)
    assert lag.recent_s() == 0.0
    asyncio.run(lag.run(ticks=4))
    assert abs(lag.recent_s() - 0.3) < 1e-9
    now[0] += 5.0  # all of it older than the window
    assert lag.recent_s() == 0.0


def test_loop_lag_stops_waking_once_requests_stop_and_starts_again_with_the_next() -> None:
    import asyncio

    from services.ingress.admission_gate import LoopLag

    now = [0.0]
    ticks = [0]

    async def sleep(s: float) -> None:
        ticks[0] += 1
        now[0] += s
        await asyncio.sleep(0)

    async def scenario() -> tuple[int, bool, int, bool]:
        lag = LoopLag(interval_s=0.1, window_s=1.0, clock=lambda: now[0], sleep=sleep, linger_s=2.0)
        lag.start()
        for _ in range(100):  # more turns than the linger allows ticks
            await asyncio.sleep(0)
        first, stopped = ticks[0], not lag.running
        lag.start()  # the next request
        await asyncio.sleep(0)
        again = lag.running
        for _ in range(100):
            await asyncio.sleep(0)
        return first, stopped, ticks[0] - first, again

    first, stopped, second, again = asyncio.run(scenario())
    assert stopped and again
    assert 19 <= first <= 22  # about linger_s / interval_s wake-ups, then none
    assert 19 <= second <= 22


def test_a_request_that_would_run_alone_is_let_in_whatever_the_prediction() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    fill(guard, 1, ttft=3.0, tpot=0.08, at=0.0)
    alone = guard.check(M, 1.0, 0.05, 0.5, 4.0)
    assert alone.admit and alone.load == 1 and alone.ttft_s == 3.0
    busy(guard, 4.0)
    assert not guard.check(M, 1.0, 0.05, 0.5, 4.0).admit
    lenient = DeliveredGuard(DeliveredGuardConfig(min_samples=1, alone_in_flight=1))
    fill(lenient, 1, ttft=3.0, tpot=0.08, at=0.0)
    busy(lenient, 4.0)
    assert lenient.check(M, 1.0, 0.05, 0.0, 4.0).admit


def test_an_answer_sent_whole_counts_in_flight_but_is_neither_late_nor_a_sample() -> None:
    guard = DeliveredGuard(DeliveredGuardConfig(min_samples=1))
    busy(guard, 0.0)
    guard.start("whole", M, 1.0, 0.0, streamed=False)
    assert guard.in_flight(M) == 2
    v = guard.check(M, 1.0, 0.05, 0.0, 2.0)  # 2 s without its "first token": it is not late
    assert v.admit and v.ttft_s == 0.0 and v.load == 3  # the busy one's sample only
    guard.first_token("whole", 2.5)  # its first token comes with its last
    guard.end("whole", 200, 2.5)
    assert guard.in_flight(M) == 1
    v = guard.check(M, 1.0, 0.05, 0.0, 3.0)
    assert v.admit and v.ttft_s == 0.0 and v.tpot_s is None
    guard.start("streamed", M, 1.0, 3.0)
    assert not guard.check(M, 1.0, 0.05, 0.0, 4.5).admit  # a streamed one 1.5 s late is late
