"""Fused residual add + RMSNorm, the pre-norm step of every LLaMA-style decoder layer.

    new_residual = x + residual                       (rounded to the input dtype)
    out          = new_residual / sqrt(mean(new_residual^2) + eps) * weight

Unfused, this is four or five elementwise/reduction kernels that each read and write the
hidden state; fused, it reads x, residual, weight once and writes out, new_residual once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tritonkernels.launch import as_rows, check_float, num_warps_for

MAX_COLS = 65536  # one row must fit in one program's registers


@triton.jit
def _fused_add_rmsnorm_kernel(
    X, R, W, Out, ResOut,  # pointers: x, residual, weight (N,), out, new residual
    stride_x, stride_r, stride_out, stride_res,  # row strides in elements (columns are adjacent)
    N, eps,
    BLOCK: tl.constexpr,  # power of two >= N: the whole row is one tile
):
    """One program normalizes one row.

    Load x and residual (masked beyond N), add them in fp32 and round the sum to the input dtype;
    store that as the new residual. Compute mean(sum^2) over the N real columns in fp32 (the
    masked lanes must not count), then out = sum * rsqrt(mean + eps) * weight, stored in Out's
    dtype. Use 64-bit row offsets: M * N can exceed 2^31.
    """
    raise NotImplementedError("s04.6: _fused_add_rmsnorm_kernel")


def fused_add_rmsnorm(
    x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6
) -> tuple[Tensor, Tensor]:
    """Residual add then RMSNorm in one Triton kernel.

    Args:
        x: (..., N) the sublayer output, float32 / float16 / bfloat16, any strides.
        residual: same shape and dtype as x.
        weight: (N,) the norm's gain, any float dtype (read in fp32).
        eps: added to the mean square before the square root.

    Returns:
        (out, new_residual), both new tensors shaped and typed like x (inputs are not modified):
        new_residual = (x + residual) rounded to x.dtype,
        out = new_residual * rsqrt(mean(new_residual^2 over the last dim) + eps) * weight,
        computed in fp32 and rounded to x.dtype.

    Raises:
        ValueError: on mismatched shapes or dtypes, or N > MAX_COLS.
    """
    if x.shape != residual.shape or x.dtype != residual.dtype:
        raise ValueError(f"x {tuple(x.shape)} {x.dtype} and residual {tuple(residual.shape)} "
                         f"{residual.dtype} must match")
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight must be ({x.shape[-1]},), got {tuple(weight.shape)}")
    if x.shape[-1] > MAX_COLS:
        raise ValueError(f"rows longer than {MAX_COLS} are not supported, got {x.shape[-1]}")
    check_float("x", x)
    raise NotImplementedError("s04.7: fused_add_rmsnorm")
