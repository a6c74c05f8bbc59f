"""Comparison of the forward-pass profiler (pure): the fitted profile against the roofline one
point by point, together with the efficiency the run implies: achieved FLOP/s in prefill against
the GPU's dense BF16 peak, achieved bytes/s in decode against its HBM bandwidth."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from services.profiler.torch_forward.measure import Measurement
from services.profiler.torch_forward.profile import (
    FittedProfile,
    decode_bytes,
    fitted_profile,
    prefill_flops,
    roofline_profile,
)
from services.profiler.torch_forward.shapes import DEFAULT_GPU, resolve_gpu
from shared.domain.hardware import GPUSpec
from shared.domain.profile import HardwareProfile
from shared.profiles.catalog import gpu_spec
from shared.profiles.roofline import RooflineParams


@dataclass(frozen=True, slots=True)
class PointComparison:
    """One grid point: measured, fitted and roofline step time, and the work it did.

    work is FLOPs for prefill and bytes read for decode; achieved = work / measured_s.
    """

    phase: str
    n: int
    x: float
    measured_s: float
    fitted_s: float
    roofline_s: float
    work: float

    @property
    def ratio(self) -> float:
        """measured / roofline (> 1: slower than the roofline predicts)."""
        return self.measured_s / self.roofline_s

    @property
    def achieved(self) -> float:
        return self.work / self.measured_s


@dataclass(frozen=True, slots=True)
class Comparison:
    """The fitted and roofline profiles side by side, point by point."""

    measurement: Measurement
    fitted: FittedProfile
    roofline: HardwareProfile
    gpu: GPUSpec
    roofline_params: RooflineParams
    points: tuple[PointComparison, ...]

    def phase(self, name: str) -> list[PointComparison]:
        return [p for p in self.points if p.phase == name]

    @property
    def prefill_efficiency(self) -> float:
        """Best achieved prefill FLOP/s as a fraction of the GPU's dense BF16 peak."""
        return max(p.achieved for p in self.phase("prefill")) / self.gpu.peak_flops

    @property
    def decode_efficiency(self) -> float:
        """Best achieved decode bytes/s as a fraction of the GPU's HBM bandwidth."""
        return max(p.achieved for p in self.phase("decode")) / self.gpu.hbm_bytes_s

    @property
    def decode_ratio_median(self) -> float:
        return statistics.median(p.ratio for p in self.phase("decode"))

    @property
    def prefill_ratio_median(self) -> float:
        return statistics.median(p.ratio for p in self.phase("prefill"))


def compare(
    m: Measurement,
    gpu: str = DEFAULT_GPU,
    *,
    kv_capacity_bytes: int | None = None,
    params: RooflineParams | None = None,
) -> Comparison:
    """Fit the measurement and compare it with the roofline of `gpu` at every grid point."""
    p = params if params is not None else RooflineParams()
    fitted = fitted_profile(m, gpu, kv_capacity_bytes)
    roof = roofline_profile(m, gpu, p)
    points: list[PointComparison] = []
    for s in m.prefill:
        points.append(
            PointComparison(
                phase="prefill",
                n=s.n,
                x=s.length,
                measured_s=s.time_s,
                fitted_s=fitted.profile.prefill_time_s(s.n, s.length),
                roofline_s=roof.prefill_time_s(s.n, s.length),
                work=prefill_flops(m.shape, m.facts, s.n, s.length),
            )
        )
    for d in m.decode:
        points.append(
            PointComparison(
                phase="decode",
                n=d.n,
                x=d.context,
                measured_s=d.time_s,
                fitted_s=fitted.profile.decode_time_s(d.context, d.n),
                roofline_s=roof.decode_time_s(d.context, d.n),
                work=decode_bytes(m.facts, d.n, d.context),
            )
        )
    return Comparison(
        measurement=m,
        fitted=fitted,
        roofline=roof,
        gpu=gpu_spec(resolve_gpu(gpu)),
        roofline_params=p,
        points=tuple(points),
    )
