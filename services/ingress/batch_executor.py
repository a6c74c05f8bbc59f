"""Executes one batch request through the same admission pipeline as a single request.

The batch's completion window becomes the request's SLO: its end-to-end deadline is the batch's
`expires_at`, and so is its TTFT deadline (rounded down to a whole minute, so the requests of
one batch share QLM's partition (model, class, TTFT) and form request groups together), in the
SLO class `batch`. With the longest deadlines in the mesh, QLM places their groups behind
every interactive group in the virtual queues, in the band `BatchConfig.criticality` (-1,
sheddable: the lowest default band, served after and shed before the others). The line's body
goes to vLLM as the same request online would (`stream` off), and its answer is the line's
response body. A 429/503 from admission comes back as an
`ExecResult` with its Retry-After for the runner to retry later.
"""

from __future__ import annotations

import json
import math
import time

from services.ingress.core.auth import Principal
from services.ingress.core.batch_files import BatchConfig
from services.ingress.core.batch_runner import BatchRequest, ExecResult
from services.ingress.core.errors import APIError
from services.ingress.core.request_view import read_view
from services.ingress.openai_relay import collect
from services.ingress.pipeline import BatchAdmission, Pipeline
from shared.domain import SLO

BATCH_CLASS = "batch"


def batch_slo(deadline_abs_s: float, now_s: float) -> SLO:
    """The SLO of a batch request sent at `now_s`: TTFT and end-to-end deadline at the batch's
    expiry (the TTFT one rounded down to a whole minute when a minute or more is left)."""
    left = max(deadline_abs_s - now_s, 1.0)
    ttft = math.floor(left / 60.0) * 60.0 if left >= 60.0 else left
    return SLO(ttft_deadline_s=ttft, e2e_deadline_s=left, class_name=BATCH_CLASS)


class PipelineExecutor:
    """`BatchExecutor` over the ingress `Pipeline` (predict, admit, stream, collect)."""

    def __init__(self, pipeline: Pipeline, config: BatchConfig) -> None:
        self.pipeline = pipeline
        self.config = config

    async def execute(self, request: BatchRequest) -> ExecResult:
        """One line, answered as the same request online is answered (vLLM's body)."""
        data = {**request.body, "stream": False}
        try:
            admission = BatchAdmission(
                Principal(**request.principal),
                batch_slo(request.deadline_abs_s, time.time()),
                f"{request.request_id[:12]}-{request.attempt}",
                self.config.criticality,
                self.config.priority,
            )
            view = read_view(request.url, data, self.pipeline.default_model)
            raw = json.dumps(data).encode()
            admitted = await self.pipeline.admit(view, raw, {}, None, admission)
            status, body = await collect(admitted)
        except APIError as err:
            return ExecResult(err.status, err.body(), err.retry_after_s)
        return ExecResult(status, json.loads(body))
