"""Test doubles shared by the RPC tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from shared.rpc.mesh_auth import MESH_TOKEN_METADATA


class FakeContext:
    """The part of Serve's gRPC context the shells use (metadata in, status out)."""

    def __init__(self, metadata: list[tuple[str, Any]] | None = None) -> None:
        self._metadata = metadata or []
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def invocation_metadata(self) -> list[tuple[str, Any]]:
        return self._metadata

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


async def status_with_token(
    address: str, stub_of: Callable[[grpc.aio.Channel], Any], method: str, request: Any, token: str
) -> str:
    """The status name a unary call to `address` gets with `token` as the mesh credential
    ("" sends none): "OK" or the gRPC code's name."""
    async with grpc.aio.insecure_channel(address) as ch:
        md = [(MESH_TOKEN_METADATA, token)] if token else []
        try:
            await getattr(stub_of(ch), method)(request, metadata=md)
        except grpc.aio.AioRpcError as err:
            return str(err.code().name)
        return "OK"
