"""FlashAttention-2 backward in Triton: recompute P from Q, K and the saved LSE, tile by tile.

With S = scale * Q K^T, P = exp(S - LSE) and dO the incoming gradient:

    dV = P^T dO        dP = dO V^T        dS = P * (dP - D),  D = rowsum(dO * O)
    dQ = scale * dS K  dK = scale * dS^T Q

D is precomputed once (a preprocessing kernel). The (dK, dV) kernel fixes a key tile and walks
the query tiles (for grouped-query attention, those of every query head sharing the KV head), so
dK and dV accumulate in registers with no atomics; the dQ kernel fixes a query tile and walks the
key tiles. P and dS are recomputed twice, the price of writing each gradient exactly once.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from flashattn.config import AttnShape, BlockConfig, backward_configs
from flashattn.layout import RaggedLayout
from flashattn.ragged_backward import ragged_backward

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _bwd_delta_kernel(O, DO, Delta, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Grid (cdiv(N, BLOCK_M), B * H): Delta[bh, i] = sum_d dO[bh, i, d] * O[bh, i, d] in fp32."""
    raise NotImplementedError("p6.1: _bwd_delta_kernel")


@triton.jit
def _bwd_dkdv_inner(
    dk, dv,  # (BLOCK_N, D) fp32 accumulators
    k, v,  # (BLOCK_N, D) the fixed key/value tile
    q_base, do_base, lse_base, delta_base,  # this (batch, query head)'s Q, dO (N, D), LSE, D (N,)
    offs_n,  # (BLOCK_N,) key indices
    lo, hi, N, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,  # query tiles that cross this key tile's diagonal
):
    """Accumulate dV += P^T dO and dK += dS^T Q (unscaled) over query rows [lo, hi); return them.

    Query rows >= N must contribute nothing (load LSE as +inf there, so P = 0).
    """
    raise NotImplementedError("p6.2: _bwd_dkdv_inner")


@triton.jit
def _bwd_dkdv_kernel(
    Q, K, V, DO, LSE, Delta, DK, DV,  # contiguous; K, V, DK, DV are (B, H_kv, N, D)
    H, N, qk_scale, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """Grid (cdiv(N, BLOCK_N), B * H_kv): dK, dV of one key tile, summed over the GROUP query
    heads that share its KV head. Causal: query tiles before the key tile are skipped, the ones
    in [start_n, start_n + BLOCK_N) are masked, the rest are not."""
    raise NotImplementedError("p6.3: _bwd_dkdv_kernel")


@triton.jit
def _bwd_dq_inner(
    dq,  # (BLOCK_M, D) fp32 accumulator
    q, do, lse2, delta,  # the fixed query tile: (BLOCK_M, D) x2, LSE in base 2 and D (BLOCK_M,)
    k_base, v_base,  # this (batch, kv head)'s K and V, (N, D)
    offs_m, lo, hi, N, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr, KEY_MASK: tl.constexpr,
):
    """Accumulate dQ += dS K (unscaled) over key rows [lo, hi); return it. Keys >= N and, under
    CAUSAL_MASK, keys after the query get P = 0."""
    raise NotImplementedError("p6.4: _bwd_dq_inner")


@triton.jit
def _bwd_dq_kernel(
    Q, K, V, DO, LSE, Delta, DQ,
    H, N, qk_scale, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """Grid (cdiv(N, BLOCK_M), B * H): dQ of one query tile. Causal: unmasked key tiles before
    the diagonal band, masked ones inside it, none after."""
    raise NotImplementedError("p6.5: _bwd_dq_kernel")


def flash_attn_backward(
    do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
    causal: bool = False, sm_scale: float | None = None,
    configs: tuple[BlockConfig, BlockConfig] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of attention with respect to q, k, v, from the forward's o and lse.

    Args:
        do: (B, H, N_q, d) gradient of the output, any strides (e.g. expanded from .sum()).
        q, k, v, o, lse: the forward's inputs and outputs (see flash_attn_forward).
        causal, sm_scale: as in the forward call (N_q != N_k: ragged_backward.py's kernels, causal
            aligned bottom-right; rows that saw no key, lse = +inf, get zero gradients).
        configs: (dK/dV tiles, dQ tiles), default config.backward_configs; the first needs
            block_n % block_m == 0, the second block_m % block_n == 0.

    Returns:
        dq (B, H, N_q, d), dk and dv (B, H_kv, N_k, d), in the dtypes of q, k, v. For grouped-query
        attention, dk and dv sum the contributions of every query head sharing a KV head.
    """
    shape = AttnShape.of(q, k, v)
    scale = 1.0 / math.sqrt(shape.head_dim) if sm_scale is None else float(sm_scale)
    cfg_kv, cfg_q = configs or backward_configs(shape.head_dim, q.is_cuda, q.dtype)
    if cfg_kv.block_n % cfg_kv.block_m or cfg_q.block_m % cfg_q.block_n:
        raise ValueError(f"bad backward tiles {cfg_kv}, {cfg_q}")
    raise NotImplementedError("p6.6: flash_attn_backward")
