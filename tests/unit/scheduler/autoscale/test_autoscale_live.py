"""The live path of the autoscaler: the scheduler's signal, its wire form and the Serve hook."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from services.scheduler.autoscale_hook import ServeScalingPolicy, latest_metrics
from services.scheduler.core.admission import AdmissionCore
from services.scheduler.core.autoscale.live import ScalingSignals, SignalConfig
from services.scheduler.core.autoscale.signal import ModelLoad, QueuedWork, predicted_attainment
from services.scheduler.core.autoscale.wire import QUEUE_BUCKETS, decode, encode
from services.scheduler.core.live_view import LiveReplica
from services.scheduler.core.policies import create_global_policy
from shared.domain import SLO, Request


def _load(queue: tuple[QueuedWork, ...], rate: float = 4.0) -> ModelLoad:
    return ModelLoad(
        model="m",
        now_s=100.0,
        ready_replicas=1,
        starting_replicas=0,
        ongoing_requests=7.0,
        arrival_rate_rps=rate,
        arrival_trend_rps_s=0.01,
        mean_output_tokens=100.0,
        replica_tokens_s=1000.0,
        prefill_s=0.02,
        replica_startup_s=12.0,
        queue=queue,
    )


@pytest.mark.parametrize("n", [0, 1, 5, QUEUE_BUCKETS, 100])
def test_wire_round_trip_keeps_scalars_and_is_never_optimistic(n: int) -> None:
    queue = tuple(QueuedWork(0.3 * k, 100.0, 25.0) for k in range(n))
    load = _load(queue)
    back = decode(encode(load), "m", 100.0, ready=2, starting=1)
    assert back is not None
    assert back.arrival_rate_rps == load.arrival_rate_rps
    assert back.replica_startup_s == load.replica_startup_s
    assert (back.ready_replicas, back.starting_replicas) == (2, 1)
    assert len(back.queue) == n
    # every decoded slack is <= the true one: the decoded attainment never exceeds the true one
    assert all(b.slack_s <= a.slack_s for a, b in zip(load.queue, back.queue, strict=True))
    for replicas in (1, 2, 3):
        assert predicted_attainment(back, replicas, 1.0) <= predicted_attainment(
            load, replicas, 1.0
        )


def test_decode_without_a_signal_is_none() -> None:
    assert decode({}, "m", 0.0, 1, 0) is None


@dataclass
class _Point:
    timestamp: float
    value: float


@dataclass
class _Ctx:
    current_num_replicas: int
    target_num_replicas: int
    current_time: float
    raw_metrics: dict[str, dict[str, list[_Point]]] = field(default_factory=dict)
    aggregated_metrics: dict[str, dict[str, float]] = field(default_factory=dict)


def _ctx(metrics: dict[str, float], t: float, ready: int = 1, target: int = 1) -> _Ctx:
    raw = {k: {"r1": [_Point(t - 1, 0.0), _Point(t, v)]} for k, v in metrics.items()}
    return _Ctx(ready, target, t, raw)


def test_latest_metrics_takes_the_newest_sample_over_replicas() -> None:
    ctx = _Ctx(1, 1, 10.0, {"a": {"r1": [_Point(5, 1.0)], "r2": [_Point(7, 2.0), _Point(6, 3.0)]}})
    assert latest_metrics(ctx) == {"a": 2.0}
    assert latest_metrics(_Ctx(1, 1, 0.0, {}, {"b": {"r1": 4.0, "r2": 5.0}})) == {"b": 5.0}


@pytest.mark.parametrize(
    ("rate", "expected"),
    [(0.5, 1), (25.0, 3), (1000.0, 4)],  # 10 r/s per replica at 90%; max_replicas 4
)
def test_serve_hook_decides_from_the_relayed_signal(rate: float, expected: int) -> None:
    hook = ServeScalingPolicy("m", {"max_replicas": 4})
    desired, state = hook(_ctx(encode(_load((), rate=rate)), 100.0))
    assert desired == expected
    assert state["slomesh_desired"] == expected and state["slomesh_reason"]


def test_serve_hook_holds_without_a_signal_and_between_intervals() -> None:
    hook = ServeScalingPolicy("m", {"interval_s": 10.0})
    assert hook(_ctx({}, 0.0, ready=2, target=2))[0] == 2  # no signal: keep the target
    # within the interval the last decision stands, whatever the metrics say
    assert hook(_ctx(encode(_load((), rate=1000.0)), 5.0, ready=2, target=2))[0] == 2
    assert hook(_ctx(encode(_load((), rate=1000.0)), 10.0, ready=2, target=2))[0] == 16


def _request(rid: str, arrival: float, model: str = "m") -> Request:
    slo = SLO(ttft_deadline_s=20.0, class_name="interactive")
    return Request(rid, model, 100, 64, arrival, slo)


def test_scaling_signals_build_the_model_load() -> None:
    sig = ScalingSignals(SignalConfig(rate_window_s=10.0, replica_tokens_s=500.0, prefill_s=0.1))
    for k in range(20):
        sig.arrival(_request(f"r{k}", 95.0 + k * 0.25), 95.0 + k * 0.25)
    sig.arrival(_request("other", 99.0, model="x"), 99.0)
    sig.finished("m", 40)
    sig.finished("m", 0)  # an abort carries no length
    queued = [_request("q1", 98.0), _request("q0", 90.0)]
    load = sig.load("m", 100.0, queued=queued, ongoing=3, profile=None)
    assert load.arrival_rate_rps == pytest.approx(2.0)
    assert load.mean_output_tokens == 40.0
    assert load.ongoing_requests == 5.0
    assert [q.slack_s for q in load.queue] == [10.0, 18.0]
    assert (load.replica_tokens_s, load.prefill_s) == (500.0, 0.1)


@pytest.mark.parametrize(("engines", "admitted"), [(1, 2), (3, 6)])
def test_a_pool_admits_per_engine(engines: int, admitted: int) -> None:
    pool = LiveReplica("pool", "A100-80GB", "m", None, engines=engines)
    core = AdmissionCore([pool], create_global_policy("round-robin", {}), "rr", max_in_flight=2)
    got = [core.admit(_request(f"r{k}", 0.0), 0.0).admitted for k in range(8)]
    assert got.count(True) == admitted and got[admitted:] == [False] * (8 - admitted)
    assert core.health()[0] is False


def test_pool_replicas_seen_within_the_window() -> None:
    sig = ScalingSignals(SignalConfig(pool_seen_window_s=10.0))
    assert sig.seen("pool", "a", 0.0) == 1
    assert sig.seen("pool", "b", 5.0) == 2
    assert sig.seen("pool", "a", 8.0) == 2
    assert sig.seen("other", "a", 8.0) == 1
    assert sig.seen("pool", "a", 16.0) == 1  # b last seen at 5 s: stopped
