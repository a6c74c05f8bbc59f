"""Discrete-event simulator: the same engine core and policies as the live mesh, on virtual time."""
