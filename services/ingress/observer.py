"""What the ingress reports about each finished or rejected request (its metrics hook).

The pipeline stays free of any metrics library: it calls a `RequestObserver`; the deployment
plugs in `ServeMetricsObserver`, which exports through Ray Serve's metrics API (Prometheus).
"""

from __future__ import annotations

from typing import Protocol

from shared.metrics.records import RequestRecord


class RequestObserver(Protocol):
    def finished(self, record: RequestRecord) -> None:
        """A request ended (finished, aborted or failed); `record.slo_met` says how it went."""
        ...

    def rejected(self, slo_class: str, reason: str) -> None:
        """Admission rejected a request."""
        ...


class NullObserver:
    def finished(self, record: RequestRecord) -> None:
        pass

    def rejected(self, slo_class: str, reason: str) -> None:
        pass


_LATENCY_BOUNDS_S = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0, 300.0]
_TPOT_BOUNDS_S = [0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.5, 1.0]


class ServeMetricsObserver:
    """Prometheus metrics through ray.serve.metrics: per SLO class TTFT/TPOT histograms and
    SLO met/missed counters, and admission rejections by reason kind."""

    def __init__(self) -> None:
        from ray.serve import metrics

        keys = ("slo_class",)
        self._ttft = metrics.Histogram(
            "slomesh_ttft_s", "time to first token", _LATENCY_BOUNDS_S, tag_keys=keys
        )
        self._tpot = metrics.Histogram(
            "slomesh_tpot_s", "mean time per output token", _TPOT_BOUNDS_S, tag_keys=keys
        )
        self._slo = metrics.Counter(
            "slomesh_requests",
            "requests by SLO outcome",
            tag_keys=("slo_class", "outcome"),  # type: ignore[arg-type]  # ray hints tuple[str]
        )
        self._rejected = metrics.Counter(
            "slomesh_rejected",
            "admissions rejected",
            tag_keys=("slo_class", "reason"),  # type: ignore[arg-type]
        )

    def finished(self, record: RequestRecord) -> None:
        tags = {"slo_class": record.class_name}
        if record.ttft_s is not None:
            self._ttft.observe(record.ttft_s, tags=tags)
        if record.tpot_s is not None and record.output_tokens > 1:
            self._tpot.observe(record.tpot_s, tags=tags)
        outcome = "met" if record.slo_met else "missed"
        self._slo.inc(tags={"slo_class": record.class_name, "outcome": outcome})

    def rejected(self, slo_class: str, reason: str) -> None:
        kind = reason.split(":", 1)[0][:40]
        self._rejected.inc(tags={"slo_class": slo_class, "reason": kind})
