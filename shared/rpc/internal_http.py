"""HTTP requests that reach an internal service's route prefix (/scheduler, /replica-0, ...).

Internal applications have route prefixes only so that Serve's gRPC proxy finds them; over HTTP
they serve nothing. Their deployments answer every HTTP request with this 404 in OpenAI's error
shape instead of Serve's plain-text 500.
"""

from __future__ import annotations

from typing import Any


def internal_not_found(application: str) -> Any:
    """A 404 JSON response naming the application and where clients should go instead."""
    from starlette.responses import JSONResponse

    return JSONResponse(
        {
            "error": {
                "message": f"'{application}' is an internal slomesh service with no HTTP API; "
                "clients use the OpenAI API under /v1",
                "type": "invalid_request_error",
                "param": None,
                "code": "not_found",
            }
        },
        status_code=404,
    )
