"""Test doubles shared by the RPC tests."""

from __future__ import annotations

from typing import Any

import grpc


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
