"""The autoscaling-policy interface and the delay rule the policies share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from services.scheduler.core.autoscale.signal import ModelLoad


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """A policy's answer for one model at one decision."""

    replicas: int
    """Desired replicas (ready + starting), within the configured bounds."""
    reason: str
    """Why, in one line (logged, and shown in the bench's event list)."""
    predicted_attainment: float | None = None
    """The queue's predicted attainment at the current count (policies that predict it)."""


class ScalingPolicy(ABC):
    """Decides one model's replica count. One object per model: it may keep state between
    decisions (windows, delay timers); `decide` is called every interval with the model's load."""

    name: str = ""

    @abstractmethod
    def decide(self, load: ModelLoad) -> ScaleDecision:
        """The desired replica count for `load` (the caller starts or stops the difference)."""


class DelayRule:
    """Ray Serve's delay logic (serve/autoscaling_policy.py `_apply_delay_logic`): a change of
    direction must be wanted without interruption for its delay before it is made; any other
    answer in between restarts the timer."""

    def __init__(self, upscale_delay_s: float, downscale_delay_s: float) -> None:
        self.upscale_delay_s = upscale_delay_s
        self.downscale_delay_s = downscale_delay_s
        self._direction = 0
        self._since_s: float | None = None

    def apply(self, desired: int, current: int, now_s: float) -> int:
        direction = (desired > current) - (desired < current)
        if direction == 0:
            self._direction, self._since_s = 0, None
            return current
        if direction != self._direction or self._since_s is None:
            self._direction, self._since_s = direction, now_s
        delay = self.upscale_delay_s if direction > 0 else self.downscale_delay_s
        if now_s - self._since_s + 1e-9 >= delay:
            self._direction, self._since_s = 0, None
            return desired
        return current


def clamp(n: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, n))
