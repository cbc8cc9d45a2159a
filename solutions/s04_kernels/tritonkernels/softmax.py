"""Numerically stable softmax over the last dim, for rows of any length.

Rows up to MAX_TILE elements are one tile: load once, subtract the row max, exponentiate,
normalize, store. Longer rows stream through tiles twice: a first pass keeps a running max m and
a running normalizer l (the online normalizer of Milakov & Gimelshein, 2018),

    m' = max(m, x_j),    l' = l * exp(m - m') + exp(x_j - m'),

and a second pass writes exp(x_j - m) / l.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tritonkernels.launch import as_rows, check_float, num_warps_for

MAX_TILE = 8192  # longest row handled as a single tile


@triton.jit
def _softmax_kernel(
    X, Y,  # pointers to the (M, N) input and output
    stride_x, stride_y,  # row strides in elements
    N,
    BLOCK: tl.constexpr,  # tile width, a power of two
    ONE_TILE: tl.constexpr,  # True when BLOCK >= N
):
    """One program computes one row's softmax in fp32 and stores it in Y's dtype.

    Masked lanes must be neutral (they must add nothing to the max or the normalizer). Entries
    equal to -inf are allowed and get probability 0, as long as the row has a finite entry.
    """
    # BEGIN SOLUTION
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, BLOCK)
    if ONE_TILE:
        x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e / tl.sum(e, axis=0)
        tl.store(y_row + cols, y.to(Y.dtype.element_ty), mask=cols < N)
    else:
        # Per-lane running max and normalizer; lanes are merged once at the end.
        m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
        l_vec = tl.zeros([BLOCK], tl.float32)
        for start in range(0, N, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_vec, x)
            # A lane that has seen only -inf keeps m = -inf: shift by 0 to avoid inf - inf.
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
            l_vec = l_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
            m_vec = m_new
        m = tl.max(m_vec, axis=0)
        l = tl.sum(l_vec * tl.exp(m_vec - m), axis=0)
        for start in range(0, N, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m) / l
            tl.store(y_row + offs, y.to(Y.dtype.element_ty), mask=offs < N)
    # END SOLUTION


def softmax(x: Tensor) -> Tensor:
    """Softmax over the last dim with a Triton kernel.

    Args:
        x: (..., N), float32 / float16 / bfloat16, any strides, any N >= 1 (rows longer than
            MAX_TILE included). Entries may be -inf (probability 0) if each row has a finite one.

    Returns:
        A new tensor shaped and typed like x; each row sums to 1 (computed in fp32).
    """
    check_float("x", x)
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"softmax needs a non-empty last dim, got shape {tuple(x.shape)}")
    # BEGIN SOLUTION
    xr = as_rows(x)
    m, n = xr.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m == 0:
        return y.reshape(x.shape)
    block = min(triton.next_power_of_2(n), MAX_TILE)
    _softmax_kernel[(m,)](
        xr, y, xr.stride(0), y.stride(0), n,
        BLOCK=block, ONE_TILE=block >= n, num_warps=num_warps_for(block),
    )
    return y.reshape(x.shape)
    # END SOLUTION
