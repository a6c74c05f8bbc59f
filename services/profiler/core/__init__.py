"""Pure core of the profiler service: hardware profiles by name and per-request estimates."""

from services.profiler.core.store import (
    CPU_DEVICE,
    Estimate,
    ProfileLookupError,
    ProfileStore,
    SupportsMeanTokens,
)

__all__ = ["CPU_DEVICE", "Estimate", "ProfileLookupError", "ProfileStore", "SupportsMeanTokens"]
