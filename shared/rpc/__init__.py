"""gRPC contracts: Python code generated from proto/slomesh/v1 (see codegen.py), plus helpers."""
