"""The OpenAI Batch API's HTTP handlers (`/v1/files`, `/v1/batches`), over `BatchStore`.

The deployment's routes call these; they authenticate like the completion routes, see only the
caller's tenant's files and batches (another tenant's id is a 404), and answer in OpenAI's
object and error shapes. Bodies are read in pieces within their size and time limits
(`batch_transfer.py`); an upload is refused before its body is read when this replica receives
`max_concurrent_uploads` already or the tenant is at a storage cap, and the caps are checked
again in the transaction that stores. Every store call runs on the handlers' own store thread
(`StoreThread`, its own SQLite connection), never on the event loop. The `BatchRunner` (one per
ingress replica, started with the deployment, with a connection and thread of its own) executes
the batches and sweeps expired files.
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
from services.ingress.batch_transfer import file_response, read_small_body, receive_upload
from services.ingress.core.auth import authenticate
from services.ingress.core.batch_errors import (
    cap_exceeded,
    file_in_use,
    too_large,
    too_many_uploads,
)
from services.ingress.core.batch_files import (
    ENDPOINTS,
    batch_object,
    deleted_file_object,
    file_object,
    parse_window,
)
from services.ingress.core.batch_runner import BatchRunner
from services.ingress.core.batch_store import BatchStore, CapExceeded
from services.ingress.core.batch_thread import StoreThread
from services.ingress.core.batch_upload import ENVELOPE_BYTES
from services.ingress.core.errors import APIError, bad_request
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
        self.db = StoreThread("batch-api")
        self.uploads = 0
        """Upload bodies this replica is receiving now."""

    def _open_store(self) -> BatchStore:
        return BatchStore(self.config.storage_dir, self.config.output_retention_s)

    @property
    def store(self) -> BatchStore:
        """The handlers' store connection, opened on first use (a replica that never sees a
        batch route or runs its runner creates no file)."""
        if self._store is None:
            self._store = self._open_store()
        return self._store

    @property
    def runner(self) -> BatchRunner:
        """This replica's runner (its own store connection); its lease owner id is unique per
        process start."""
        if self._runner is None:
            self._runner = BatchRunner(
                self._open_store(),
                PipelineExecutor(self._pipeline, self.config),
                self.config,
                owner=f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}",
                clock=time.time,
            )
        return self._runner

    async def _ready(self) -> BatchStore:
        """The handlers' store, opened on the store thread."""
        if self._store is None:
            return await self.db(lambda: self.store)
        return self._store

    def _tenant(self, request: HTTPRequest) -> str:
        return authenticate(request.headers.get("authorization"), self.args.api_keys).tenant

    def _batch_sync(self, batch_id: str, tenant: str) -> dict[str, Any]:
        row = self.store.get_batch(batch_id)
        if row is None or row["tenant"] != tenant:
            raise _not_found("batch", batch_id)
        return batch_object(row, self.store.counts(batch_id))

    def _file_sync(self, file_id: str, tenant: str) -> dict[str, Any]:
        row = self.store.get_file(file_id)
        if row is None or row["tenant"] != tenant:
            raise _not_found("file", file_id)
        return row

    async def upload(self, request: HTTPRequest) -> dict[str, Any]:
        """POST /v1/files (multipart: `file`, `purpose` "batch"): received into a part file in
        pieces, validated line by line as it arrives, then stored."""
        tenant = self._tenant(request)
        cfg = self.config
        if self.uploads >= cfg.max_concurrent_uploads:
            raise too_many_uploads(cfg.max_concurrent_uploads, cfg.upload_retry_after_s)
        self.uploads += 1
        try:
            store = await self._ready()
            declared = request.headers.get("content-length", "")
            limit = cfg.max_file_bytes + ENVELOPE_BYTES
            if declared.isdigit() and int(declared) > limit:
                raise too_large(
                    f"request body ({declared} bytes declared)",
                    limit,
                    "batch.max_file_bytes + 64 KiB of multipart envelope",
                )
            stored, files = await self.db(store.usage, tenant)
            if files >= cfg.max_files_per_tenant:
                raise cap_exceeded(
                    tenant, "batch.max_files_per_tenant", cfg.max_files_per_tenant, files
                )
            if stored >= cfg.max_stored_bytes_per_tenant:
                cap = "batch.max_stored_bytes_per_tenant"
                raise cap_exceeded(tenant, cap, cfg.max_stored_bytes_per_tenant, stored)
            path = store.upload_path()
            try:
                upload = await receive_upload(request, path, cfg)
                now = time.time()
                row = await self.db(
                    store.add_file,
                    tenant,
                    upload.filename or "batch.jsonl",
                    "batch",
                    path,
                    now,
                    now + cfg.input_retention_s,
                    cfg.max_stored_bytes_per_tenant,
                    cfg.max_files_per_tenant,
                )
            except CapExceeded as err:
                raise cap_exceeded(tenant, err.cap, err.limit, err.current) from None
            finally:
                path.unlink(missing_ok=True)  # gone already once stored
        finally:
            self.uploads -= 1
        return file_object(row)

    async def get_file(self, request: HTTPRequest, file_id: str) -> dict[str, Any]:
        return file_object(await self.db(self._file_sync, file_id, self._tenant(request)))

    async def delete_file(self, request: HTTPRequest, file_id: str) -> dict[str, Any]:
        """DELETE /v1/files/{id}: refused (409) while a batch that is not final reads it."""
        store = await self._ready()
        outcome = await self.db(store.delete_file, file_id, self._tenant(request))
        if outcome == "missing":
            raise _not_found("file", file_id)
        if outcome == "in_use":
            raise file_in_use(file_id)
        return deleted_file_object(file_id)

    async def file_content(self, request: HTTPRequest, file_id: str) -> Response:
        store = await self._ready()
        await self.db(self._file_sync, file_id, self._tenant(request))
        response = await file_response(store.file_path(file_id))
        if response is None:  # deleted meanwhile
            raise _not_found("file", file_id)
        return response

    async def create_batch(self, request: HTTPRequest) -> dict[str, Any]:
        """POST /v1/batches {input_file_id, endpoint, completion_window, metadata}."""
        principal = authenticate(request.headers.get("authorization"), self.args.api_keys)
        raw = await read_small_body(request, self.config)
        store = await self._ready()
        data = decode_json(
            raw,
            max_body_bytes=self.config.max_create_body_bytes,
            max_json_depth=self.args.admission.max_json_depth,
        )
        if not isinstance(data, dict):
            raise bad_request(None, "request body must be a JSON object")
        file_id = data.get("input_file_id")
        if not isinstance(file_id, str):
            raise bad_request("input_file_id", "is required: the id of an uploaded batch file")
        row = await self.db(store.get_file, file_id)
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
        cap = self.config.max_open_batches_per_tenant
        try:
            batch = await self.db(
                store.create_batch,
                owner,
                file_id,
                endpoint,
                str(window),
                window_s,
                metadata,
                time.time(),
                cap,
            )
        except CapExceeded as err:
            raise cap_exceeded(principal.tenant, err.cap, err.limit, err.current) from None
        return await self.db(self._batch_sync, batch["id"], principal.tenant)

    async def get_batch(self, request: HTTPRequest, batch_id: str) -> dict[str, Any]:
        return await self.db(self._batch_sync, batch_id, self._tenant(request))

    def _list_sync(self, tenant: str, after: str | None, limit: int) -> dict[str, Any]:
        rows, has_more = self.store.list_batches(tenant, after, limit)
        data = [batch_object(r, self.store.counts(r["id"])) for r in rows]
        return {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": has_more,
        }

    async def list_batches(self, request: HTTPRequest) -> dict[str, Any]:
        tenant = self._tenant(request)
        after = request.query_params.get("after")
        raw_limit = request.query_params.get("limit", "20")
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 100:
            raise bad_request("limit", f"must be an integer from 1 to 100, got {raw_limit!r}")
        return await self.db(self._list_sync, tenant, after, int(raw_limit))

    async def cancel(self, request: HTTPRequest, batch_id: str) -> dict[str, Any]:
        tenant = self._tenant(request)
        store = await self._ready()
        await self.db(self._batch_sync, batch_id, tenant)
        before = await self.db(store.request_cancel, batch_id, time.time())
        if before in ("completed", "failed", "expired"):
            raise APIError(
                409,
                f"batch '{batch_id}' is {before} and can no longer be cancelled",
                "invalid_request_error",
                "batch_id",
                "batch_not_cancellable",
            )
        return await self.db(self._batch_sync, batch_id, tenant)
