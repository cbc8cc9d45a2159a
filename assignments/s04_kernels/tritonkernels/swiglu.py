"""Fused SwiGLU activation of the LLaMA MLP: silu(gate) * up, with silu(g) = g * sigmoid(g).

Eager PyTorch runs silu and the product as two kernels and writes silu(gate) to memory in
between; the fused kernel reads gate and up once and writes the result once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tritonkernels.launch import check_float

BLOCK = 2048  # elements per program
NUM_WARPS = 8


@triton.jit
def _swiglu_kernel(
    G, U, Out,  # pointers to flat, contiguous gate, up and output
    n_elements,
    BLOCK: tl.constexpr,
):
    """Program p handles elements [p * BLOCK, (p + 1) * BLOCK) of the flat tensors.

    Compute in fp32, store in Out's dtype; mask the tail. Offsets must be 64-bit (a large MLP
    activation can hold more than 2^31 elements).
    """
    raise NotImplementedError("s04.10: _swiglu_kernel")


def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up, elementwise, in one Triton kernel.

    Args:
        gate: (...) float32 / float16 / bfloat16, any strides.
        up: same shape and dtype as gate.

    Returns:
        A new contiguous tensor shaped and typed like gate, computed in fp32 and rounded once.
    """
    if gate.shape != up.shape or gate.dtype != up.dtype:
        raise ValueError(f"gate {tuple(gate.shape)} {gate.dtype} and up {tuple(up.shape)} "
                         f"{up.dtype} must match")
    check_float("gate", gate)
    raise NotImplementedError("s04.11: swiglu")
