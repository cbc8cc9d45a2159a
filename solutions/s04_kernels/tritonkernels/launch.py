"""Launch helpers shared by the row kernels: 2-D row views and warp counts.

Given code: nothing to fill in here. A row kernel sees its input as an (M, N) matrix whose
rows are `stride` elements apart and whose columns are adjacent (stride 1).
"""

from __future__ import annotations

import torch
from torch import Tensor


def as_rows(x: Tensor) -> Tensor:
    """View x of shape (..., N) as (M, N) with unit column stride; copies only when it must.

    The result may have any row stride (pass `rows.stride(0)` to the kernel).
    """
    if x.dim() == 0:
        raise ValueError("expected a tensor with at least one dimension, got a scalar")
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    if n > 1 and rows.stride(1) != 1:
        rows = rows.contiguous()
    return rows


def num_warps_for(block: int) -> int:
    """Warps per program for a row tile of `block` elements (about 8-16 elements per thread)."""
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    if block >= 512:
        return 4
    return 2


def check_float(name: str, t: Tensor) -> None:
    """Reject dtypes the kernels do not handle, with a clear message."""
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"{name} must be float32, float16 or bfloat16, got {t.dtype}")
