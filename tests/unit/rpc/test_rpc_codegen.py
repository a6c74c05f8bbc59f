"""The committed generated code equals what `make proto` produces from proto/ now."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.rpc import codegen


def test_rpc_generated_code_is_current(tmp_path: Path) -> None:
    fresh = codegen.generate(tmp_path)
    assert fresh, "codegen wrote nothing"
    committed_dir = codegen.OUT_DIR
    for path in fresh:
        rel = path.relative_to(tmp_path)
        committed = committed_dir / rel
        assert committed.exists(), f"{rel} is not committed: run `make proto`"
        assert committed.read_text() == path.read_text(), f"{rel} is stale: run `make proto`"
    committed_files = {
        p.relative_to(committed_dir) for p in (committed_dir / "slomesh").rglob("*.py*")
    }
    fresh_files = {p.relative_to(tmp_path) for p in fresh}
    assert committed_files == fresh_files, "generated files added or removed: run `make proto`"


@pytest.mark.parametrize(
    ("module", "service"),
    [
        ("ingress", "Ingress"),
        ("predictor", "Predictor"),
        ("profiler", "Profiler"),
        ("scheduler", "Scheduler"),
        ("deployer", "Deployer"),
        ("replica", "Replica"),
    ],
)
def test_rpc_one_service_per_deployment(module: str, service: str) -> None:
    import importlib

    grpc_mod = importlib.import_module(f"shared.rpc.slomesh.v1.{module}_pb2_grpc")
    assert hasattr(grpc_mod, f"add_{service}Servicer_to_server")
    assert hasattr(grpc_mod, f"{service}Stub")


def test_rpc_every_field_is_documented() -> None:
    """Each field in the .proto files has its own comment on the line above it."""
    for proto in sorted((codegen.PROTO_DIR / codegen.PACKAGE).glob("*.proto")):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip()
            is_field = (
                stripped.endswith(";")
                and "=" in stripped
                and not stripped.startswith(("syntax", "package", "import", "option", "//"))
            )
            if not is_field:
                continue
            assert lines[i - 1].strip().startswith("//"), (
                f"{proto.name}:{i + 1} field without a comment: {stripped}"
            )
