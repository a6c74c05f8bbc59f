"""Profiler service: hardware profiles and per-request time and KV-memory estimates."""
