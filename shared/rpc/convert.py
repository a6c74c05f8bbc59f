"""Conversions between domain dataclasses (seconds) and protobuf messages (ms / Unix seconds)."""

from __future__ import annotations

from shared.domain import SLO, Request
from shared.domain.prefix import PromptPrefix
from shared.rpc.slomesh.v1 import common_pb2

_U64 = (1 << 64) - 1
"""Block hashes travel as uint64 (Python's hash() is signed)."""

REPLICA_UNAVAILABLE = "replica-unavailable"
"""CompletionReport.finish_reason of a request whose replica could not open its stream (the
replica's process is gone): the scheduler stops placing there until its next Status answer."""


def slo_to_msg(slo: SLO) -> common_pb2.Slo:
    return common_pb2.Slo(
        ttft_slo_ms=slo.ttft_deadline_s * 1e3,
        tpot_slo_ms=(slo.tpot_target_s or 0.0) * 1e3,
        deadline_ms=(slo.e2e_deadline_s or 0.0) * 1e3,
        class_name=slo.class_name,
    )


def slo_from_msg(msg: common_pb2.Slo) -> SLO:
    return SLO(
        ttft_deadline_s=msg.ttft_slo_ms / 1e3,
        tpot_target_s=msg.tpot_slo_ms / 1e3 or None,
        e2e_deadline_s=msg.deadline_ms / 1e3 or None,
        class_name=msg.class_name or "default",
    )


def request_to_meta(r: Request) -> common_pb2.RequestMeta:
    """Metadata only: the prompt never enters a RequestMeta."""
    return common_pb2.RequestMeta(
        request_id=r.request_id,
        model=r.model,
        input_tokens=r.input_tokens,
        max_tokens=r.max_tokens,
        priority=r.priority,
        slo=slo_to_msg(r.slo),
        tenant=r.tenant,
        arrival_unix_s=r.arrival_s,
        criticality=r.criticality,
        tenant_weight=r.tenant_weight,
        prefix_block_hashes=[h & _U64 for h in r.prefix.block_hashes] if r.prefix else [],
        prefix_block_size_tokens=r.prefix.block_size_tokens if r.prefix else 0,
        adapter=r.adapter or "",
    )


def request_from_meta(
    meta: common_pb2.RequestMeta, true_output_tokens: int | None = None
) -> Request:
    """The domain request; arrival_s keeps the Unix time (live clocks are Unix-based)."""
    return Request(
        request_id=meta.request_id,
        model=meta.model,
        input_tokens=max(1, meta.input_tokens),
        max_tokens=max(1, meta.max_tokens),
        arrival_s=meta.arrival_unix_s,
        slo=slo_from_msg(meta.slo),
        tenant=meta.tenant or "default",
        true_output_tokens=true_output_tokens or None,
        priority=meta.priority,
        criticality=meta.criticality,
        tenant_weight=meta.tenant_weight if meta.tenant_weight > 0 else 1.0,
        prefix=(
            PromptPrefix(meta.prefix_block_size_tokens, tuple(meta.prefix_block_hashes))
            if meta.prefix_block_hashes and meta.prefix_block_size_tokens > 0
            else None
        ),
        adapter=meta.adapter or None,
    )
