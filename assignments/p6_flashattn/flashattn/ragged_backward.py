"""Backward for sequences with lengths of their own (N_q != N_k, packed batches): backward.py's
algorithm with ragged_forward.py's bottom-right causal mask and per-sequence lengths.

Rows with no key were saved with lse = +inf: P = exp2(s - inf) = 0 there, so they get dQ = 0 and
add nothing to dK, dV with no special case. Query rows past len_q belong to the next sequence (or
head): load them with lse = +inf (P = 0), or a key tile's dK, dV would sum a neighbour's queries.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from flashattn.config import BlockConfig
from flashattn.layout import RaggedLayout
from flashattn.ragged_forward import sequence_bounds

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _ragged_delta_kernel(
    O, DO, Delta, CU_Q, CU_K, stride_qb, stride_qh, stride_qm, stride_lb, stride_lh,
    H, LEN_Q, LEN_K, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, VARLEN: tl.constexpr,
):
    """Grid (cdiv(max_len_q, BLOCK_M), B * H): D_i = sum_d dO_id * O_id (fp32), rows < len_q."""
    raise NotImplementedError("p6.13: _ragged_delta_kernel")


@triton.jit
def _ragged_dkdv_inner(
    dk, dv, k, v,  # (BLOCK_N, D) fp32 accumulators; the fixed key/value tile
    q_base, do_base, stride_qm, lse_base, delta_base,  # this sequence's query head: row 0 of each
    offs_n,  # (BLOCK_N,) key indices within the sequence
    lo, hi, len_q, diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
    MASK: tl.constexpr,  # apply the causal mask j <= i + diag (query tiles crossing the band)
):
    """Accumulate dV += P^T dO and dK += dS^T Q (unscaled) over query rows [lo, hi); return them.
    Rows >= len_q contribute nothing."""
    raise NotImplementedError("p6.14: _ragged_dkdv_inner")


@triton.jit
def _ragged_dkdv_kernel(
    Q, K, V, DO, LSE, Delta, DK, DV, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn, stride_lb, stride_lh,
    H, LEN_Q, LEN_K, qk_scale, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr,
):
    """Grid (cdiv(max_len_k, BLOCK_N), B * H_kv): dK, dV of one key tile of one sequence, summed
    over its GROUP query heads and over that sequence's queries only. Causal: queries before
    start_n - diag see none of the tile (skipped), those in the next BLOCK_N rows see part of it
    (masked), the rest see all of it."""
    raise NotImplementedError("p6.15: _ragged_dkdv_kernel")


@triton.jit
def _ragged_dq_inner(
    dq, q, do, lse2, delta,  # (BLOCK_M, D) fp32 accumulator; the fixed query tile and its rows
    k_base, v_base, stride_kn, offs_m, lo, hi, len_k, diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,  # mask keys >= len_k and, if CAUSAL, keys j > i + diag
    CAUSAL: tl.constexpr,
):
    """Accumulate dQ += dS K (unscaled) over key tiles [lo, hi); return it."""
    raise NotImplementedError("p6.16: _ragged_dq_inner")


@triton.jit
def _ragged_dq_kernel(
    Q, K, V, DO, LSE, Delta, DQ, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qm, stride_kb, stride_kh, stride_kn, stride_lb, stride_lh,
    H, LEN_Q, LEN_K, qk_scale, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr,
):
    """Grid (cdiv(max_len_q, BLOCK_M), B * H): dQ of one query tile of one sequence, over the same
    unmasked and masked key tiles as the forward's."""
    raise NotImplementedError("p6.17: _ragged_dq_kernel")


def ragged_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                    layout: RaggedLayout, causal: bool, scale: float,
                    configs: tuple[BlockConfig, BlockConfig]) -> tuple[Tensor, Tensor, Tensor]:
    """Launch the delta, dK/dV and dQ kernels on contiguous tensors described by layout.

    Returns dq (like q), dk and dv (like k). configs: (dK/dV tiles, dQ tiles), any sizes.
    """
    raise NotImplementedError("p6.18: ragged_backward")
