"""Pure core of the ingress (no Ray, no gRPC, no web framework, no wall clock).

- `openai_schema`: OpenAI-compatible request models and body parsing (response builders re-exported
  from `openai_responses`);
- `errors`: `APIError` and OpenAI's error shape;
- `slo`: SLO policy and resolution from body, headers and API key;
- `auth`: API keys to principals;
- `admission`: validated request to `shared.domain.Request` metadata.
"""

from services.ingress.core.auth import APIKeyConfig, KeyEntry, Principal, authenticate
from services.ingress.core.errors import APIError, from_validation_error
from services.ingress.core.openai_responses import ChunkStream, sse
from services.ingress.core.openai_schema import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    SLOObject,
    parse_body,
    validate_body,
)
from services.ingress.core.request_meta import (
    AdmissionConfig,
    ModelInfo,
    admission_request,
)
from services.ingress.core.slo import SLOClassSpec, SLOLimits, SLOPolicy, resolve_slo

__all__ = [
    "APIError",
    "APIKeyConfig",
    "AdmissionConfig",
    "ChatCompletionRequest",
    "ChatMessage",
    "ChunkStream",
    "CompletionRequest",
    "KeyEntry",
    "ModelInfo",
    "Principal",
    "SLOClassSpec",
    "SLOLimits",
    "SLOObject",
    "SLOPolicy",
    "admission_request",
    "authenticate",
    "from_validation_error",
    "parse_body",
    "resolve_slo",
    "sse",
    "validate_body",
]
