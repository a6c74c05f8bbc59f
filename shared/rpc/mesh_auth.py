"""The mesh credential: only slomesh's own services may call its internal services over gRPC.

Serve's gRPC proxy listens on every interface and routes any caller to any application by the
`application` metadata, so every internal method (predictor, profiler, scheduler, deployer,
replicas) checks that the call carries the mesh's secret in metadata `x-slomesh-mesh-token`,
compared in constant time (hmac.compare_digest), and refuses it with UNAUTHENTICATED otherwise.
The secret comes from the environment variable SLOMESH_MESH_TOKEN of the Ray processes:
`slomesh up` generates one at start-up unless it is set. With no secret configured every
internal gRPC call is refused (fail closed), so a service that serves or sends internal gRPC
calls refuses to start without it (require_mesh_token: under `serve deploy` its application
fails to deploy with a message naming the variable, instead of turning healthy and failing every
request). Calls over Serve deployment handles (the default
internal transport) are Ray actor calls inside the cluster: they carry no gRPC context and are
protected by Ray's own token authentication (RAY_AUTH_MODE=token), not by this check.
"""

from __future__ import annotations

import hmac
import os
import secrets
from typing import Any

MESH_TOKEN_ENV = "SLOMESH_MESH_TOKEN"
MESH_TOKEN_METADATA = "x-slomesh-mesh-token"


class MeshCredentialRefused(RuntimeError):
    """An internal method was called over gRPC without the mesh's credential."""


class MeshCredentialMissing(RuntimeError):
    """A service that needs the mesh credential was started without one."""


def mesh_token() -> str | None:
    """This process's mesh secret (None: not configured)."""
    return os.environ.get(MESH_TOKEN_ENV) or None


def new_mesh_token() -> str:
    """A fresh random secret (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def credential_metadata() -> list[tuple[str, str]]:
    """Metadata that proves an outgoing internal call comes from the mesh ([] without a secret)."""
    token = mesh_token()
    return [(MESH_TOKEN_METADATA, token)] if token else []


def credential_ok(grpc_context: Any) -> bool:
    """Whether the caller may use an internal method (module docstring)."""
    if grpc_context is None:
        return True  # a Serve handle call from inside the Ray cluster
    expected = mesh_token()
    if expected is None:
        return False
    got = ""
    for key, value in grpc_context.invocation_metadata() or ():
        if key.lower() == MESH_TOKEN_METADATA:
            got = value if isinstance(value, str) else value.decode("utf-8", "replace")
    return hmac.compare_digest(got.encode(), expected.encode())


def require_mesh_credential(grpc_context: Any, method: str) -> None:
    """Refuse the call with UNAUTHENTICATED unless it carries the mesh credential.

    Serve keeps a status set on the context before a raise, so the caller sees UNAUTHENTICATED
    with this message; the exception is a plain RuntimeError so it pickles to the proxy.
    """
    if credential_ok(grpc_context):
        return
    import grpc

    message = (
        f"{method} is internal to the mesh: send the mesh credential in metadata "
        f"'{MESH_TOKEN_METADATA}' (the {MESH_TOKEN_ENV} of the mesh); clients call the ingress"
    )
    grpc_context.set_code(grpc.StatusCode.UNAUTHENTICATED)
    grpc_context.set_details(message)
    raise MeshCredentialRefused(message)


def require_mesh_token(what: str) -> None:
    """Refuse to start `what` (a service that serves or sends internal gRPC calls) when this
    process has no mesh secret: every such call would be refused, so a deployment would look
    healthy and fail every request. The message names the variable to set.

    The secret is not derived from Ray's token (RAY_AUTH_TOKEN): a cluster without Ray's token
    authentication has none, Ray rotates and loads its token through private interfaces, and a
    secret of its own lets the mesh's gRPC listeners be shared with processes outside Ray."""
    if mesh_token() is not None:
        return
    raise MeshCredentialMissing(
        f"{what} needs the mesh credential: set {MESH_TOKEN_ENV} to one random value for the whole "
        "cluster in the environment of every Ray process (before `ray start`, or in the Serve "
        "config's runtime_env env_vars), e.g. "
        f"{MESH_TOKEN_ENV}=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))'); "
        "without it every internal call is refused (UNAUTHENTICATED). `slomesh up` sets one itself"
    )
