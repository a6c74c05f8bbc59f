"""The Batch API's settings (the ingress's `batch` args): storage, limits and the runner's knobs.

Every limit is enforced while a body is read or before a row is written: sizes as the bytes
arrive (413 the moment a cap is passed), per-tenant caps before and again inside the
transaction that stores (429 naming the cap), upload time limits on every chunk (408).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

_MIB = 1024 * 1024
_DAY_S = 86_400.0


class BatchConfig(BaseModel):
    """The Batch API's storage, limits and execution (the ingress's `batch` args)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    storage_dir: str = "~/.cache/slomesh/batches"
    """Directory of the store: the SQLite file (`batches-v2.sqlite3`: file and batch rows, the
    request journal, run leases) and the file contents (`files/`, one file each; `uploads/`,
    uploads being received). Every ingress replica must see the same directory (local disk of
    one machine; SQLite locking is not safe on network file systems)."""
    max_file_bytes: int = Field(200 * _MIB, ge=1)
    """Largest upload, bytes (OpenAI's limit: 200 MB). The upload is cut off with 413 as soon
    as its file part passes this, whatever its transfer encoding."""
    max_requests_per_batch: int = Field(50_000, ge=1)
    """Most request lines in one batch input file (OpenAI's limit: 50,000); the line past it
    is a 400 while the upload streams in."""
    max_line_bytes: int = Field(4 * _MIB, ge=1024)
    """Longest line of an input file, bytes (one request: the single-request body limit, 4 MiB
    by default); a longer one is a 400 naming the line, after at most this many bytes of it."""
    max_create_body_bytes: int = Field(64 * 1024, ge=1024)
    """Largest `POST /v1/batches` JSON body, bytes (ids, window and at most 16 metadata
    pairs fit in far less); 413 while it is read."""
    max_stored_bytes_per_tenant: int = Field(10 * 1024 * _MIB, ge=1)
    """Bytes of files (inputs and the outputs of its batches) a tenant may keep stored; an
    upload while at or over it is a 429 naming the cap, before its body is read. Outputs are
    always written (they count, they are never refused)."""
    max_files_per_tenant: int = Field(1_000, ge=1)
    """Files (inputs and outputs) a tenant may keep stored; an upload past it is a 429."""
    max_open_batches_per_tenant: int = Field(100, ge=1)
    """Batches of a tenant not yet final (validating, in_progress, finalizing, cancelling);
    `POST /v1/batches` past it is a 429."""
    input_retention_s: float = Field(30 * _DAY_S, gt=0)
    """Uploaded files are deleted this long after their upload (their `expires_at`), seconds;
    a file an open batch still reads is kept until that batch is final."""
    output_retention_s: float = Field(30 * _DAY_S, gt=0)
    """Output and error files are deleted this long after their batch finished, seconds."""
    batch_retention_s: float = Field(30 * _DAY_S, gt=0)
    """A final batch's row (what `GET /v1/batches/{id}` answers) is deleted this long after it
    finished, seconds."""
    sweep_interval_s: float = Field(60.0, gt=0)
    """How often each ingress replica deletes expired files and batches and leftovers of
    interrupted uploads, seconds."""
    max_concurrent_uploads: int = Field(4, ge=1)
    """`POST /v1/files` bodies one ingress replica receives at once; another is answered 429
    with Retry-After before its body is read."""
    upload_retry_after_s: float = Field(2.0, gt=0)
    """Retry-After of that 429, seconds."""
    upload_idle_timeout_s: float = Field(30.0, gt=0)
    """A request body of the Batch API that sends nothing for this long is cut off with 408,
    seconds (a stalled or trickling client holds no upload slot for longer)."""
    upload_deadline_s: float = Field(600.0, gt=0)
    """A Batch API request body must have arrived this long after its request began, else 408,
    seconds (200 MB in 600 s needs ~0.33 MB/s)."""
    max_concurrent_requests: int = Field(8, ge=1)
    """Batch requests one ingress replica keeps in admission or in flight at once (the cap of
    its additive-increase / multiplicative-decrease window, which halves on each 429)."""
    max_fault_attempts: int = Field(3, ge=1)
    """Attempts of one batch request that end in a server fault (a replica lost mid-request, a
    5xx other than 503, an internal error): it is sent again until this many failed, then its
    last answer goes to the error file. 429/503 (not admitted) do not count."""
    priority: int = 1000
    """vLLM priority of batch requests (lower is served first): the lowest by default."""
    criticality: int = -1
    """Band of batch requests (gateway convention: 1 critical, 0 standard, -1 sheddable): the
    scheduler serves higher bands first and sheds sheddable requests first when saturated
    (a shed batch request is retried later, not failed)."""
    min_window_s: float = Field(60.0, gt=0)
    """Shortest completion_window accepted, seconds."""
    max_window_s: float = Field(86_400.0, gt=0)
    """Longest completion_window accepted, seconds (OpenAI accepts only "24h")."""
    lease_ttl_s: float = Field(30.0, gt=0)
    """A batch's run lease lasts this long unless renewed; a replica that dies holding it is
    replaced by another after at most this long."""
    poll_interval_s: float = Field(1.0, gt=0)
    """How often an idle runner looks for batches to run, seconds."""
    retry_min_s: float = Field(1.0, gt=0)
    """First wait before a request answered 429/503 (or a server fault) is sent again,
    seconds (doubles per retry of that request, at least the answer's Retry-After)."""
    retry_max_s: float = Field(30.0, gt=0)
    """Longest wait between retries of one request, seconds."""
    early_fail_min_done: int = Field(20, ge=1)
    """Requests that must have finished before the progress rate may fail a batch early."""
    early_fail_min_elapsed_fraction: float = Field(0.1, ge=0, le=1)
    """Fraction of the window that must have elapsed before the progress rate may fail a
    batch early (the rate of the first minutes is mostly start-up)."""
    early_fail_slack: float = Field(1.5, ge=1)
    """A batch fails early when its remaining requests at the measured rate need more than
    this many times the time left in its window."""

    @model_validator(mode="after")
    def _consistent(self) -> BatchConfig:
        if self.min_window_s > self.max_window_s:
            raise ValueError("batch.min_window_s must not exceed batch.max_window_s")
        return self
