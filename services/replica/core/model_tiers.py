"""Model residency tiers of one instance (QLM §5 model swapping): GPU-active, CPU-warm, cold.

Loading the active model takes weight_bytes / PCIe bandwidth from the warm tier, or
weight_bytes / storage bandwidth from cold (the storage read dominates the pipelined PCIe copy).
The model leaving the GPU stays warm in host memory if the warm tier has room (LRU otherwise).
"""

from __future__ import annotations

from collections import OrderedDict

from shared.domain import HardwareProfile


class ModelTiers:
    def __init__(
        self,
        profiles: dict[str, HardwareProfile],
        host_model_cache_bytes: int,
        active: str | None = None,
    ) -> None:
        if active is not None and active not in profiles:
            raise ValueError(f"active model '{active}' has no profile on this instance")
        self.profiles = profiles
        self.host_model_cache_bytes = host_model_cache_bytes
        self.active = active
        self.warm: OrderedDict[str, int] = OrderedDict()

    def tier(self, model: str) -> str:
        if model == self.active:
            return "gpu"
        return "cpu" if model in self.warm else "cold"

    def load_time_s(self, model: str) -> float:
        p = self.profiles[model]
        if model == self.active:
            return 0.0
        bw = p.swap_bytes_s if model in self.warm else p.cold_load_bytes_s
        return p.weight_bytes / bw

    def activate(self, model: str) -> None:
        """Make `model` GPU-active; the previous one drops to the warm tier."""
        if model not in self.profiles:
            raise ValueError(f"model '{model}' has no profile on this instance")
        old = self.active
        self.warm.pop(model, None)
        self.active = model
        if old is not None and old != model:
            self.warm[old] = self.profiles[old].weight_bytes
            self.warm.move_to_end(old)
            while sum(self.warm.values()) > self.host_model_cache_bytes and self.warm:
                self.warm.popitem(last=False)

    def prewarm(self, model: str) -> None:
        """Stage `model` in host memory (used by QLM to keep the next models in the VQ warm)."""
        if model != self.active and model in self.profiles:
            self.warm[model] = self.profiles[model].weight_bytes
            while sum(self.warm.values()) > self.host_model_cache_bytes and len(self.warm) > 1:
                self.warm.popitem(last=False)
