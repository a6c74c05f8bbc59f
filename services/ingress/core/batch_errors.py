"""The Batch API's own OpenAI-shaped errors: sizes, per-tenant caps, time limits, busy uploads.

Each message names the config field that set the limit.
"""

from __future__ import annotations

from services.ingress.core.errors import INVALID_REQUEST, APIError


def too_large(what: str, limit_bytes: int, field: str, param: str | None = None) -> APIError:
    """413: `what` passed `limit_bytes` (reading stopped there)."""
    return APIError(
        413,
        f"{what} is over the limit of {limit_bytes} bytes ({field}); reading stopped there",
        INVALID_REQUEST,
        param,
        "request_too_large",
    )


def cap_exceeded(tenant: str, cap: str, limit: int, current: int) -> APIError:
    """429: a per-tenant storage cap (`cap` names the config field) is reached."""
    what = {
        "batch.max_files_per_tenant": (
            f"stores {current} files",
            "delete files (DELETE /v1/files/{id}) or wait until they expire",
            "file_limit_exceeded",
        ),
        "batch.max_stored_bytes_per_tenant": (
            f"stores {current} bytes of files",
            "delete files (DELETE /v1/files/{id}) or wait until they expire",
            "storage_limit_exceeded",
        ),
        "batch.max_open_batches_per_tenant": (
            f"has {current} batches not yet final",
            "wait for some to finish or cancel them",
            "open_batch_limit_exceeded",
        ),
    }[cap]
    return APIError(
        429,
        f"tenant '{tenant}' {what[0]}; the cap is {limit} ({cap}): {what[1]}",
        INVALID_REQUEST,
        None,
        what[2],
    )


def too_slow(what: str, seconds: float, field: str) -> APIError:
    """408: a request body stalled or took too long."""
    return APIError(
        408,
        f"request body: {what} {seconds:g} s ({field}); reading stopped",
        INVALID_REQUEST,
        None,
        "request_timeout",
    )


def too_many_uploads(limit: int, retry_after_s: float) -> APIError:
    """429 with Retry-After: this ingress replica receives `limit` uploads already."""
    return APIError(
        429,
        f"this ingress replica is receiving {limit} uploads already "
        "(batch.max_concurrent_uploads); retry later",
        "rate_limit_exceeded",
        None,
        "too_many_uploads",
        retry_after_s=retry_after_s,
    )


def file_in_use(file_id: str) -> APIError:
    """409: the file is the input of a batch that is not final."""
    return APIError(
        409,
        f"file '{file_id}' is the input of a batch that is not final; cancel the batch or wait "
        "until it finishes, then delete the file",
        INVALID_REQUEST,
        "file_id",
        "file_in_use",
    )
