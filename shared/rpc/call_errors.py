"""What a failed internal call stands for, as a gRPC status name, and whether to retry it.

A call over a Serve deployment handle fails with a Python exception, not a status: Ray's own
errors for a callee that is gone or not yet up (its actor died, its node was lost, no replica
is running), Serve's refusals (back-pressure, a cancelled request), or the callee's own
exception wrapped in `RayTaskError`. Only the first kind is worth retrying elsewhere or later
(UNAVAILABLE); the callee's exceptions are deterministic (the same message fails the same way:
INVALID_ARGUMENT for a message it refused, INTERNAL for a fault), and retrying them only holds
the caller. A gRPC call's status is taken as is.
"""

from __future__ import annotations

import asyncio

RETRYABLE = frozenset({"UNAVAILABLE"})
"""Statuses a caller may retry (on another replica, or after a pause)."""

_CAUSE_STATUS: tuple[tuple[str, str], ...] = (
    ("MeshCredentialRefused", "UNAUTHENTICATED"),
    ("InvalidMessage", "INVALID_ARGUMENT"),
    ("ValidationError", "INVALID_ARGUMENT"),
    ("DecodeError", "INVALID_ARGUMENT"),
    ("NotImplementedError", "UNIMPLEMENTED"),
)
"""Callee exceptions (by class name anywhere in the exception's type hierarchy) and their
status; matched before the built-in types below."""


def retryable(status: str) -> bool:
    """Whether a call that failed with `status` may be retried."""
    return status in RETRYABLE


def _names(err: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(err).__mro__}


def _ray_status(err: BaseException) -> str | None:
    """The status of Ray's and Serve's own errors (None: not one of them)."""
    from ray import exceptions as rex
    from ray.serve import exceptions as sex

    if isinstance(err, sex.BackPressureError):
        return "RESOURCE_EXHAUSTED"  # the callee's queue is full: overload, not absence
    if isinstance(err, (sex.RequestCancelledError, rex.TaskCancelledError)):
        return "CANCELLED"
    if isinstance(err, (rex.GetTimeoutError, rex.ObjectFetchTimedOutError)):
        return "DEADLINE_EXCEEDED"
    if isinstance(err, rex.RayTaskError):
        return None  # the callee's own exception: classified by its cause
    if isinstance(err, (rex.RayError, sex.RayServeException)):
        return "UNAVAILABLE"  # actor or node gone, no replica up, worker crashed, ...
    return None


def status_of(err: BaseException) -> str:
    """The gRPC status name a failed call stands for (module docstring)."""
    import grpc

    if isinstance(err, grpc.aio.AioRpcError):
        return str(err.code().name)
    ray_status = _ray_status(err)
    if ray_status is not None:
        return ray_status
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException) and cause is not err:
        inner = _ray_status(cause)
        if inner is not None:  # the callee failed calling someone that is gone
            return inner
        err = cause
    names = _names(err)
    for name, status in _CAUSE_STATUS:
        if name in names:
            return status
    if isinstance(err, (TimeoutError, asyncio.TimeoutError)):
        return "DEADLINE_EXCEEDED"
    if isinstance(err, asyncio.CancelledError):
        return "CANCELLED"
    if isinstance(err, (ValueError, TypeError, KeyError)):
        return "INVALID_ARGUMENT"
    if isinstance(err, ConnectionError):
        return "UNAVAILABLE"
    return "INTERNAL"
