"""OpenTelemetry set-up and W3C trace-context propagation over HTTP headers and gRPC metadata.

Each process (Serve replica) calls `setup_tracing(service, config)` once from its constructor.
Spans cross gRPC hops as a `traceparent` metadata entry; across HTTP as the standard header.

Traces are head-sampled: the process that starts a trace (the ingress, for a request without a
`traceparent`) keeps it with probability `sample_ratio`, decided from the trace id, and every
later span follows its parent's decision (OpenTelemetry's `ParentBased(TraceIdRatioBased)`),
so a trace is whole or absent. A caller's `traceparent` with the sampled flag set is always
traced. A span not sampled records nothing and exports nothing; its context still propagates.
Counts that must cover every request (admissions, CPU per admission) come from the services'
counters, never from spans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased
from pydantic import BaseModel, ConfigDict, Field

_configured: dict[str, bool] = {}


class TracingConfig(BaseModel):
    """Where spans go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exporter: Literal["none", "console", "file", "otlp"] = "file"
    """none; console (stdout); file (JSON lines at file_path); otlp (gRPC to otlp_endpoint)."""
    file_path: str = "runs/traces.jsonl"
    """JSON-lines span file for exporter "file" (one span per line, appended)."""
    otlp_endpoint: str = "http://127.0.0.1:4317"
    """OTLP/gRPC collector for exporter "otlp"."""
    sample_ratio: float = Field(0.1, ge=0.0, le=1.0)
    """Share of new traces kept (head sampling, by trace id; 0-1): 1 traces every request, 0
    only those whose caller's `traceparent` is sampled. Spans of a sampled request are kept
    in every service (they follow the parent's decision)."""
    export_batch_size: int = Field(512, ge=1)
    """Spans written per export call at most (the batch processor's `max_export_batch_size`)."""
    export_delay_ms: int | None = Field(None, ge=1)
    """How long spans wait in memory before export, milliseconds; None: 1000 for "file" and
    "console", 5000 for "otlp"."""


class _JsonLinesExporter(ConsoleSpanExporter):
    """Appends each span as one JSON line to a file (the embedded default: no collector needed)."""

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the exporter
        super().__init__(out=self._file, formatter=lambda s: s.to_json(indent=None) + "\n")


def setup_tracing(service: str, config: TracingConfig) -> None:
    """Install a tracer provider for this process (idempotent per process)."""
    if _configured.get(service) or config.exporter == "none":
        return
    exporter: SpanExporter
    if config.exporter == "console":
        exporter = ConsoleSpanExporter()
    elif config.exporter == "file":
        exporter = _JsonLinesExporter(config.file_path)
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint, insecure=True)
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"slomesh-{service}"}),
        sampler=sampler(config.sample_ratio),
    )
    # batched export keeps span I/O off the request path
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            schedule_delay_millis=export_delay_ms(config),
            max_export_batch_size=config.export_batch_size,
        )
    )
    trace.set_tracer_provider(provider)
    _configured[service] = True


def sampler(ratio: float) -> Sampler:
    """Head sampling at `ratio` for traces started here; a span with a parent follows it."""
    return ParentBased(TraceIdRatioBased(ratio))


def export_delay_ms(config: TracingConfig) -> int:
    """The batch processor's delay between exports (config.export_delay_ms, else by exporter)."""
    if config.export_delay_ms is not None:
        return config.export_delay_ms
    return 5000 if config.exporter == "otlp" else 1000


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(f"slomesh.{name}")


def grpc_metadata(extra: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """Metadata for an outgoing gRPC call: the current trace context plus `extra` pairs."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return [*extra, *carrier.items()]


def context_from(pairs: Iterable[tuple[str, str]] | Mapping[str, str]) -> otel_context.Context:
    """The trace context carried by incoming gRPC metadata or HTTP headers."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return extract({k.lower(): v for k, v in items})


def incoming_context(
    grpc_context: object | None, trace_headers: Mapping[str, str] | None
) -> otel_context.Context | None:
    """The caller's trace context: gRPC metadata (proxy calls) or W3C headers (handle calls)."""
    if trace_headers:
        return context_from(trace_headers)
    metadata = getattr(grpc_context, "invocation_metadata", None)
    return context_from(metadata()) if callable(metadata) else None


def trace_headers() -> dict[str, str]:
    """The current trace context as W3C headers (for calls that carry no gRPC metadata)."""
    return dict(grpc_metadata())
