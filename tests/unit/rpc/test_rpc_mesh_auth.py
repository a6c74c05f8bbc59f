"""The mesh credential on internal gRPC methods: accepted, refused, fail closed."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from grpc_fakes import FakeContext

from shared.rpc.mesh_auth import (
    MESH_TOKEN_ENV,
    MESH_TOKEN_METADATA,
    MeshCredentialRefused,
    credential_metadata,
    credential_ok,
    new_mesh_token,
    require_mesh_credential,
)


@pytest.mark.parametrize(
    ("configured", "sent", "ok"),
    [
        ("s3cret", [(MESH_TOKEN_METADATA, "s3cret")], True),
        ("s3cret", [(MESH_TOKEN_METADATA.upper(), "s3cret")], True),  # metadata keys fold case
        ("s3cret", [(MESH_TOKEN_METADATA, b"s3cret")], True),  # binary metadata value
        ("s3cret", [(MESH_TOKEN_METADATA, "s3cre")], False),
        ("s3cret", [(MESH_TOKEN_METADATA, "s3cret-and-more")], False),
        ("s3cret", [("authorization", "Bearer s3cret")], False),  # wrong header
        ("s3cret", [], False),
        (None, [(MESH_TOKEN_METADATA, "")], False),  # no secret configured: fail closed
        (None, [], False),
    ],
)
def test_grpc_callers_need_the_mesh_secret(
    monkeypatch: pytest.MonkeyPatch, configured: str | None, sent: list[Any], ok: bool
) -> None:
    if configured is None:
        monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(MESH_TOKEN_ENV, configured)
    ctx = FakeContext(sent)
    assert credential_ok(ctx) is ok
    if ok:
        require_mesh_credential(ctx, "replica.Generate")
        assert ctx.code is None
    else:
        with pytest.raises(MeshCredentialRefused, match=r"replica\.Generate is internal"):
            require_mesh_credential(ctx, "replica.Generate")
        assert ctx.code == grpc.StatusCode.UNAUTHENTICATED
        assert MESH_TOKEN_METADATA in ctx.details


def test_handle_calls_carry_no_grpc_context_and_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    assert credential_ok(None)
    require_mesh_credential(None, "scheduler.Admit")


def test_outgoing_calls_send_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MESH_TOKEN_ENV, raising=False)
    assert credential_metadata() == []
    token = new_mesh_token()
    assert len(token) >= 43 and token != new_mesh_token()
    monkeypatch.setenv(MESH_TOKEN_ENV, token)
    assert credential_metadata() == [(MESH_TOKEN_METADATA, token)]
    assert credential_ok(FakeContext(credential_metadata()))
