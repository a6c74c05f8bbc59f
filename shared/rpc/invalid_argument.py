"""INVALID_ARGUMENT for an internal RPC whose message breaks a domain rule.

An internal call that carries the mesh credential but a message the domain refuses (an SLO with
no TTFT objective, max_tokens 0, a negative tenant weight) is the caller's mistake, not a server
fault: it gets INVALID_ARGUMENT with the method, the field and the rule, never INTERNAL.
Serve keeps a status set on the context before a raise, so the raise below reaches the caller as
that status; the exception is a plain ValueError subclass (one message argument) so it
pickles to Serve's proxy, and the replica's own gRPC server maps it to the same status.
"""

from __future__ import annotations

from typing import Any, NoReturn

from shared.domain import Request
from shared.rpc.convert import request_from_meta
from shared.rpc.slomesh.v1 import common_pb2


class InvalidMessage(ValueError):
    """An internal RPC's message broke a domain rule (the caller's fault)."""


def refuse_invalid(grpc_context: Any, method: str, err: Exception) -> NoReturn:
    """Set INVALID_ARGUMENT naming the method and the broken rule, and raise."""
    message = f"{method}: invalid message: {err}"
    if grpc_context is not None:
        import grpc

        grpc_context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
        grpc_context.set_details(message)
    raise InvalidMessage(message) from None


def request_or_refuse(
    meta: common_pb2.RequestMeta,
    grpc_context: Any,
    method: str,
    true_output_tokens: int | None = None,
) -> Request:
    """The domain request of `meta`, or INVALID_ARGUMENT when it breaks a rule of `Request`."""
    try:
        return request_from_meta(meta, true_output_tokens)
    except ValueError as err:
        refuse_invalid(grpc_context, method, err)
