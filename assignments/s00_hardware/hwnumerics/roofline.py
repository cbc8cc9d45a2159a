"""The roofline model: attainable FLOP/s = min(peak, intensity * bandwidth)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .specs import DeviceSpec

Bound = Literal["memory", "compute"]


@dataclass(frozen=True)
class Workload:
    """A kernel reduced to two numbers: FLOPs executed and bytes moved to or from main memory."""

    flops: float
    bytes: float

    def __post_init__(self) -> None:
        if not self.flops >= 0:
            raise ValueError(f"Workload.flops must be >= 0, got {self.flops}")
        if not self.bytes > 0:
            raise ValueError(f"Workload.bytes must be > 0, got {self.bytes}")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/byte."""
        return self.flops / self.bytes


@dataclass(frozen=True)
class RooflinePoint:
    """Where a workload sits on a device's roofline."""

    intensity: float  # FLOP/byte
    attainable_flops: float  # FLOP/s, min(peak, intensity * bandwidth)
    bound: Bound  # "memory" below the ridge point, "compute" at or above it
    min_time_s: float  # lower bound on run time: max(flops / peak, bytes / bandwidth)


def ridge_point(device: DeviceSpec, dtype: str) -> float:
    """Intensity (FLOP/byte) where the memory roof meets the compute roof: peak / bandwidth.

    Example: H100 SXM bf16 = 989e12 FLOP/s / 3.35e12 B/s ~ 295 FLOP/byte.
    """
    raise NotImplementedError("s00.16: ridge_point")


def attainable_flops(device: DeviceSpec, dtype: str, intensity: float) -> float:
    """Roofline ceiling in FLOP/s for a kernel of `intensity` FLOP/byte: min(peak, intensity * bw).

    ValueError if intensity is negative.
    """
    raise NotImplementedError("s00.17: attainable_flops")


def analyze(work: Workload, device: DeviceSpec, dtype: str) -> RooflinePoint:
    """Place `work` on the roofline of `device` computing in `dtype`.

    bound is "compute" when the intensity is at or above the ridge point, else "memory".
    min_time_s is the time neither roof can beat: max(work.flops / peak, work.bytes / bandwidth).
    """
    raise NotImplementedError("s00.18: analyze")
