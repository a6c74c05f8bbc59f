"""Seeded workload generation: Azure LLM traces, arrival processes, length sources, SLO classes,
declarative specs and the generator that turns a spec and a seed into `Request`s.

Everything is pure and seeded (no global RNG); nothing is read at import time.
"""

from shared.workloads.arrivals import gamma_arrivals, poisson_arrivals, trace_arrivals
from shared.workloads.generator import generate, split_requests
from shared.workloads.length_samplers import (
    clip_lengths,
    fixed_lengths,
    sample_lengths,
    trace_lengths,
    uniform_lengths,
)
from shared.workloads.slo_classes import (
    CLASS_PRESETS,
    QLM_CLASSES,
    SCORPIO_CLASSES,
    SLOClass,
    get_slo_class,
)
from shared.workloads.spec import LengthSpec, StreamSpec, WorkloadSpec
from shared.workloads.traces import AzureTrace, load_azure_trace, parse_azure_csv, quantiles

__all__ = [
    "CLASS_PRESETS",
    "QLM_CLASSES",
    "SCORPIO_CLASSES",
    "AzureTrace",
    "LengthSpec",
    "SLOClass",
    "StreamSpec",
    "WorkloadSpec",
    "clip_lengths",
    "fixed_lengths",
    "gamma_arrivals",
    "generate",
    "get_slo_class",
    "load_azure_trace",
    "parse_azure_csv",
    "poisson_arrivals",
    "quantiles",
    "sample_lengths",
    "split_requests",
    "trace_arrivals",
    "trace_lengths",
    "uniform_lengths",
]
