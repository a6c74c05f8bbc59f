"""Turning bad input into one clear line and exit code 2."""

from __future__ import annotations

from pydantic import ValidationError


class UsageError(Exception):
    """Bad input on the command line: printed as one line, exit code 2."""


def describe(err: Exception) -> str:
    """One line naming the field and the rule, for pydantic and plain errors alike."""
    if isinstance(err, ValidationError):
        parts = []
        for e in err.errors():
            loc = ".".join(str(x) for x in e["loc"]) or err.title
            parts.append(f"{loc}: {e['msg']}")
        return "; ".join(parts)
    return str(err)
