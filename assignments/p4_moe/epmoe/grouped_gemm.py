"""Grouped GEMM for MoE experts in Triton: every expert's rows in one launch.

Rows arrive sorted by expert: expert e's rows are x[offsets[e]:offsets[e + 1]] (some experts may
have none). For weights W (E, N, K) the grouped product is
    out[offsets[e] + i] = x[offsets[e] + i] @ W[e]^T        (fp32 accumulation, stored in x's dtype)
The launch grid is (cdiv(M, BLOCK_M) + E, cdiv(N, BLOCK_N)): expert e needs cdiv(m_e, BLOCK_M) row
tiles, and sum_e cdiv(m_e, BLOCK_M) <= cdiv(M, BLOCK_M) + E, so no host read of the offsets is
needed (a device sync on the GPU). Program (t, n) finds its expert in the kernel from a cumulative
sum of the experts' tile counts; programs past the last tile return at once.

_grouped_kernel with SWIGLU computes silu(x W_gate[e]^T) * (x W_up[e]^T) with two accumulators
(the expert's first half, one launch); without it, x W[e]^T (the down projection).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _grouped_kernel(
    X, W, W2, OUT, OFFS,
    N, E, K: tl.constexpr,  # K a constexpr: Triton 3.6's interpreter cannot take a runtime loop bound
    stride_xm, stride_xk,
    stride_we, stride_wn, stride_wk,  # W and W2 share strides (E, N, K)
    stride_om, stride_on,
    SWIGLU: tl.constexpr, E_POW2: tl.constexpr, PRECISION: tl.constexpr,  # "ieee" for fp32 operands
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    raise NotImplementedError("p4.9: _grouped_kernel")


def _check(x: Tensor, offsets: Tensor, w: Tensor) -> None:
    if x.dim() != 2 or w.dim() != 3 or x.shape[1] != w.shape[2]:
        raise ValueError(f"grouped_gemm: x {tuple(x.shape)} and weights {tuple(w.shape)} must be (M, K) and (E, N, K)")
    if offsets.shape != (w.shape[0] + 1,) or offsets.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"grouped_gemm: offsets must be ({w.shape[0] + 1},) int32/int64, got "
                         f"{tuple(offsets.shape)} {offsets.dtype}")
    if x.dtype != w.dtype or x.device != w.device or offsets.device != x.device:
        raise ValueError("grouped_gemm: x, weights and offsets must share a device, x and weights a dtype")


def tile_sizes(x: Tensor) -> dict:
    """Default tiles and dot precision: for 16-bit operands on the GPU, tensor-core sized (8 warps, 3
    stages: two 128 x 128 fp32 accumulators and 3 x 48 KiB of operand tiles fit an H100's SM); fp32
    operands on the GPU are multiplied in full fp32 ("ieee": tf32 keeps 10 mantissa bits, 1e-2 off
    over K = 48) in smaller tiles (3 fp32 operand tiles of 128 x 64 at 3 stages need 288 KiB of
    shared memory, more than an H100 has); small under the CPU interpreter."""
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    if x.is_cuda and x.dtype != torch.float32:
        return {"block_m": 128, "block_n": 128, "block_k": 64, "num_warps": 8, "num_stages": 3, "precision": precision}
    if x.is_cuda:
        return {"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4, "num_stages": 2, "precision": precision}
    return {"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4, "num_stages": 1, "precision": precision}


def grouped_gemm(x: Tensor, offsets: Tensor, w: Tensor, w2: Tensor | None = None, *,
                 block_m: int | None = None, block_n: int | None = None, block_k: int | None = None) -> Tensor:
    """x (M, K) sorted by expert, offsets (E + 1,) with offsets[0] = 0, offsets[E] = M; w (E, N, K)
    -> (M, N): x W[e]^T per expert; with w2 (E, N, K): silu(x W[e]^T) * (x W2[e]^T).
    block_*: tile sizes (powers of two, >= 16; default tile_sizes(x))."""
    _check(x, offsets, w)
    if w2 is not None and (w2.shape != w.shape or w2.stride() != w.stride() or w2.dtype != w.dtype):
        raise ValueError("grouped_gemm: w2 must have w's shape, strides and dtype")
    tiles = tile_sizes(x)
    block_m, block_n, block_k = block_m or tiles["block_m"], block_n or tiles["block_n"], block_k or tiles["block_k"]
    if any(b < 16 or b & (b - 1) for b in (block_m, block_n, block_k)):
        raise ValueError(f"grouped_gemm: tiles {block_m}, {block_n}, {block_k} must be powers of two >= 16")
    raise NotImplementedError("p4.10: grouped_gemm")


def grouped_swiglu(x: Tensor, offsets: Tensor, gate: Tensor, up: Tensor, down: Tensor, **tiles) -> Tensor:
    """A whole SwiGLU expert layer over rows sorted by expert: gate/up (E, I, H), down (E, H, I);
    x (M, H) -> (M, H). Two launches: the fused gate/up with silu, then the down projection."""
    raise NotImplementedError("p4.11: grouped_swiglu")
