"""Domain model shared by every service core, the simulator and the tests."""

from shared.domain.clock import Clock, VirtualClock, WallClock
from shared.domain.hardware import GPUSpec, ModelSpec
from shared.domain.profile import DecodeCoeffs, HardwareProfile, PrefillCoeffs
from shared.domain.request import SLO, LengthHint, Request

__all__ = [
    "SLO",
    "Clock",
    "DecodeCoeffs",
    "GPUSpec",
    "HardwareProfile",
    "LengthHint",
    "ModelSpec",
    "PrefillCoeffs",
    "Request",
    "VirtualClock",
    "WallClock",
]
