"""Replica service: the engine interface, the simulated engine core, and per-engine policies."""
