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
    raise NotImplementedError("s04.8: _softmax_kernel")


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
    raise NotImplementedError("s04.9: softmax")
