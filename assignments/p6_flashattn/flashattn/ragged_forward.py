"""Forward for sequences with lengths of their own: N_q != N_k, and packed variable-length batches.

The same online softmax as forward.py, with two differences that forward.py's kernel (N_q == N_k,
the fast path) never needs:

- Causal is aligned bottom-right (FlashAttention 2.1+): with diag = len_k - len_q, query i attends
  keys j <= i + diag, so the last query sees every key. Rows with i + diag < 0 see no key at all.
- A row with no key gets o = 0 and lse = +inf (FlashAttention's convention): the backward then
  recomputes P = exp(s - lse) = 0 there, so such a row has zero gradients and adds nothing to dK,
  dV. While a row has seen no key its running max is -inf; the exponents subtract 0 instead, or
  exp(-inf - (-inf)) would be NaN.

Sequence b's lengths come from cu_seqlens (VARLEN) or are the fixed LEN_Q, LEN_K; a key tile that
reaches past len_k must mask its loads, or it reads the next sequence's (or head's) keys.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from flashattn.config import BlockConfig
from flashattn.layout import RaggedLayout

LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def sequence_bounds(CU_Q, CU_K, off_b, LEN_Q, LEN_K, VARLEN: tl.constexpr):
    """(first query row, query count, first key row, key count) of sequence off_b."""
    raise NotImplementedError("p6.19: sequence_bounds")


@triton.jit
def _ragged_fwd_inner(
    acc, l_i, m_i, q,  # running state (BLOCK_M, D), (BLOCK_M,) x2; the query tile (BLOCK_M, D)
    k_base, v_base, stride_kn,  # this sequence's and kv head's key row 0; elements between rows
    offs_m,  # (BLOCK_M,) query rows within the sequence
    lo, hi, len_k, diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,  # mask keys >= len_k and, if CAUSAL, keys j > i + diag
    CAUSAL: tl.constexpr,
):
    """Fold key tiles [lo, hi) (lo a multiple of BLOCK_N) into (acc, l_i, m_i); return them."""
    raise NotImplementedError("p6.20: _ragged_fwd_inner")


@triton.jit
def _ragged_fwd_kernel(
    Q, K, V, O, LSE, CU_Q, CU_K,
    stride_qb, stride_qh, stride_qm,  # q and o
    stride_kb, stride_kh, stride_kn,  # k and v
    stride_lb, stride_lh,  # lse
    H, LEN_Q, LEN_K, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, VARLEN: tl.constexpr,
):
    """Grid (cdiv(max_len_q, BLOCK_M), B * H): one query tile of one (sequence, head).

    A tile past its sequence's len_q does nothing. Key tiles every row of the tile sees in full
    run unmasked; the rest up to the last key the tile's last row sees run masked. Rows with no
    key: o = 0, lse = +inf. Store only rows < len_q.
    """
    raise NotImplementedError("p6.21: _ragged_fwd_kernel")


def ragged_forward(q: Tensor, k: Tensor, v: Tensor, layout: RaggedLayout, causal: bool,
                   scale: float, cfg: BlockConfig) -> tuple[Tensor, Tensor]:
    """Launch _ragged_fwd_kernel on contiguous q, k, v described by layout.

    Returns o (like q) and lse (layout.lse_shape(q.shape[0]), fp32, natural log, +inf on rows with
    no key). Tiles: any cfg (no divisibility needed between block_m and block_n).
    """
    raise NotImplementedError("p6.22: ragged_forward")
