"""Two measured ceilings: device-memory copy bandwidth and dense GEMM throughput."""

from __future__ import annotations

import torch

from .timing import benchmark


def _resolve(device: str | torch.device | None) -> torch.device:
    return torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))


def copy_bandwidth(
    nbytes: int, *, device: str | torch.device | None = None, warmup: int = 3, reps: int = 20
) -> float:
    """Measured copy bandwidth in bytes/s, counting bytes read plus bytes written.

    Allocate two uint8 buffers of `nbytes` on `device` (None as in benchmark), time
    `dst.copy_(src)` with `benchmark` (looked up as this module's global, flush_l2=True), and
    return 2 * nbytes / median_s. (An H200 copies at about 4.3e12 B/s counted this way.)
    """
    raise NotImplementedError("s00.7: copy_bandwidth")


def gemm_tflops(
    n: int,
    dtype: torch.dtype = torch.bfloat16,
    *,
    device: str | torch.device | None = None,
    warmup: int = 3,
    reps: int = 20,
) -> float:
    """Measured dense GEMM throughput in TFLOP/s (1e12 FLOP/s) for n x n @ n x n in `dtype`.

    Inputs drawn with torch.randn (seeded with torch.manual_seed(0)) on `device`; time
    `torch.matmul(a, b)` with `benchmark` (this module's global, flush_l2=True); return
    2 * n**3 / median_s / 1e12.
    """
    raise NotImplementedError("s00.8: gemm_tflops")
