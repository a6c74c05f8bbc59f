"""The OpenAI Batch API's HTTP handlers (`/v1/files`, `/v1/batches`), over `BatchStore`.

The deployment's routes call these; they authenticate like the completion routes, see only the
caller's tenant's files and batches (another tenant's id is a 404), and answer in OpenAI's
object and error shapes. The `BatchRunner` (one per ingress replica, started with the
deployment) executes the batches.
"""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any

from fastapi import Request as HTTPRequest
from fastapi.responses import Response

from services.ingress.args import IngressArgs
from services.ingress.batch_executor import PipelineExecutor
from services.ingress.core.auth import authenticate
from services.ingress.core.batch_files import (
    ENDPOINTS,
    batch_object,
    file_object,
    parse_batch_file,
    parse_window,
)
from services.ingress.core.batch_runner import BatchRunner
from services.ingress.core.batch_store import BatchStore
from services.ingress.core.errors import APIError, bad_request, body_too_large
from services.ingress.core.json_body import decode_json
from services.ingress.pipeline import Pipeline

_MAX_METADATA = 16


def _not_found(kind: str, ident: str) -> APIError:
    return APIError(404, f"no {kind} with id '{ident}'", "invalid_request_error", "id", None)


class BatchAPI:
    """Handlers of the Batch API routes, and the replica's batch runner."""

    def __init__(self, args: IngressArgs, pipeline: Pipeline) -> None:
        self.args = args
        self.config = args.batch
        self._pipeline = pipeline
        self._store: BatchStore | None = None
        self._runner: BatchRunner | None = None

    @property
    def store(self) -> BatchStore:
        """The SQLite store, opened on first use (a replica that never sees a batch route or
        runs its runner creates no file)."""
        if self._store is None:
            self._store = BatchStore(self.config.storage_dir)
        return self._store

    @property
    def runner(self) -> BatchRunner:
        """This replica's runner; its lease owner id is unique per process start."""
        if self._runner is None:
            self._runner = BatchRunner(
                self.store,
                PipelineExecutor(self._pipeline, self.config),
                self.config,
                owner=f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}",
                clock=time.time,
            )
        return self._runner

    def _tenant(self, request: HTTPRequest) -> str:
        return authenticate(request.headers.get("authorization"), self.args.api_keys).tenant

    def _batch(self, batch_id: str, tenant: str) -> dict[str, Any]:
        row = self.store.get_batch(batch_id)
        if row is None or row["tenant"] != tenant:
            raise _not_found("batch", batch_id)
        return batch_object(row, self.store.counts(batch_id))

    def _file(self, file_id: str, tenant: str) -> dict[str, Any]:
        row = self.store.get_file(file_id)
        if row is None or row["tenant"] != tenant:
            raise _not_found("file", file_id)
        return row

    async def upload(self, request: HTTPRequest) -> dict[str, Any]:
        """POST /v1/files (multipart: `file`, `purpose` "batch"): validated, then stored."""
        tenant = self._tenant(request)
        declared = request.headers.get("content-length", "")
        limit = self.config.max_file_bytes
        if declared.isdigit() and int(declared) > limit + 65_536:
            raise body_too_large(int(declared), limit)
        try:
            form = await request.form(max_files=1, max_fields=8)
        except Exception as exc:  # malformed multipart
            raise bad_request("file", f"the body must be multipart/form-data: {exc}") from None
        purpose = form.get("purpose")
        if purpose != "batch":
            raise bad_request("purpose", f"must be 'batch' (the only one served), got {purpose!r}")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise bad_request("file", "is required: a JSONL file part")
        content = await upload.read(limit + 1)
        if len(content) > limit:
            raise body_too_large(-1, limit)
        parse_batch_file(content, self.config)
        row = self.store.create_file(
            tenant, upload.filename or "batch.jsonl", "batch", content, time.time()
        )
        return file_object(row)

    def get_file(self, request: HTTPRequest, file_id: str) -> dict[str, Any]:
        return file_object(self._file(file_id, self._tenant(request)))

    def file_content(self, request: HTTPRequest, file_id: str) -> Response:
        self._file(file_id, self._tenant(request))
        content = self.store.file_content(file_id) or b""
        return Response(content, media_type="application/octet-stream")

    async def create_batch(self, request: HTTPRequest) -> dict[str, Any]:
        """POST /v1/batches {input_file_id, endpoint, completion_window, metadata}."""
        principal = authenticate(request.headers.get("authorization"), self.args.api_keys)
        raw = await request.body()
        data = decode_json(raw, max_body_bytes=self.args.admission.max_body_bytes)
        if not isinstance(data, dict):
            raise bad_request(None, "request body must be a JSON object")
        file_id = data.get("input_file_id")
        if not isinstance(file_id, str):
            raise bad_request("input_file_id", "is required: the id of an uploaded batch file")
        row = self.store.get_file(file_id)
        if row is None or row["tenant"] != principal.tenant:
            raise bad_request("input_file_id", f"no file with id '{file_id}'")
        if row["purpose"] != "batch":
            raise bad_request("input_file_id", f"file '{file_id}' has purpose {row['purpose']}")
        endpoint = data.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise bad_request(
                "endpoint", f"must be one of {', '.join(sorted(ENDPOINTS))}, got {endpoint!r}"
            )
        window = data.get("completion_window")
        window_s = parse_window(window, self.config)  # type: ignore[arg-type]
        metadata = data.get("metadata")
        if metadata is not None and not (
            isinstance(metadata, dict)
            and len(metadata) <= _MAX_METADATA
            and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())
        ):
            raise bad_request("metadata", f"must map at most {_MAX_METADATA} strings to strings")
        owner = {
            "tenant": principal.tenant,
            "default_class": principal.default_class,
            "tokens_per_minute": principal.tokens_per_minute,
        }
        batch = self.store.create_batch(
            owner, file_id, endpoint, str(window), window_s, metadata, time.time()
        )
        return batch_object(batch, self.store.counts(batch["id"]))

    def get_batch(self, request: HTTPRequest, batch_id: str) -> dict[str, Any]:
        return self._batch(batch_id, self._tenant(request))

    def list_batches(self, request: HTTPRequest) -> dict[str, Any]:
        tenant = self._tenant(request)
        after = request.query_params.get("after")
        raw_limit = request.query_params.get("limit", "20")
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 100:
            raise bad_request("limit", f"must be an integer from 1 to 100, got {raw_limit!r}")
        rows, has_more = self.store.list_batches(tenant, after, int(raw_limit))
        data = [batch_object(r, self.store.counts(r["id"])) for r in rows]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": has_more,
        }

    def cancel(self, request: HTTPRequest, batch_id: str) -> dict[str, Any]:
        tenant = self._tenant(request)
        self._batch(batch_id, tenant)
        before = self.store.request_cancel(batch_id, time.time())
        if before in ("completed", "failed", "expired"):
            raise APIError(
                409,
                f"batch '{batch_id}' is {before} and can no longer be cancelled",
                "invalid_request_error",
                "batch_id",
                "batch_not_cancellable",
            )
        return self._batch(batch_id, tenant)
