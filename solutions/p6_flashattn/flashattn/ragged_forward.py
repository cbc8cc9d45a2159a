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
    # BEGIN SOLUTION
    if VARLEN:
        q_start = tl.load(CU_Q + off_b)
        len_q = tl.load(CU_Q + off_b + 1) - q_start
        k_start = tl.load(CU_K + off_b)
        len_k = tl.load(CU_K + off_b + 1) - k_start
    else:  # tensors, not Python ints: LEN_Q may arrive as a constant (Triton specializes 1)
        q_start = tl.full([], 0, tl.int32)
        len_q = q_start + LEN_Q
        k_start = q_start
        len_k = q_start + LEN_K
    return q_start, len_q, k_start, len_k
    # END SOLUTION


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
    # BEGIN SOLUTION
    offs_d = tl.arange(0, HEAD_DIM)
    offs_nb = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_nb
        kv_off = cols[:, None].to(tl.int64) * stride_kn + offs_d[None, :]
        if MASK:
            k = tl.load(k_base + kv_off, mask=cols[:, None] < len_k, other=0.0)
            v = tl.load(v_base + kv_off, mask=cols[:, None] < len_k, other=0.0)
        else:
            k = tl.load(k_base + kv_off)
            v = tl.load(v_base + kv_off)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N), base 2
        if MASK:
            ok = cols[None, :] < len_k
            if CAUSAL:
                ok = ok & (cols[None, :] <= offs_m[:, None] + diag)
            s = tl.where(ok, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a row with no key so far
        alpha = tl.math.exp2(m_i - m_safe)
        p = tl.math.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i
    # END SOLUTION


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
    # BEGIN SOLUTION
    if CAUSAL:  # the longest query tiles first
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_h = off_bh % H
    off_hkv = off_h // GROUP
    q_start, len_q, k_start, len_k = sequence_bounds(CU_Q, CU_K, off_b, LEN_Q, LEN_K, VARLEN)
    if start_m >= len_q:
        return
    q_off = (off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
             + q_start.to(tl.int64) * stride_qm)
    kv_off = (off_b.to(tl.int64) * stride_kb + off_hkv.to(tl.int64) * stride_kh
              + k_start.to(tl.int64) * stride_kn)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < len_q
    rows = offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
    q = tl.load(Q + q_off + rows, mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = len_k - len_q  # query i sees keys j <= i + diag
    if CAUSAL:
        hi = tl.minimum(tl.maximum(start_m + BLOCK_M + diag, 0), len_k)
        n_free = tl.minimum(tl.maximum(start_m + diag + 1, 0), len_k) // BLOCK_N * BLOCK_N
    else:
        hi = len_k
        n_free = len_k // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _ragged_fwd_inner(acc, l_i, m_i, q, K + kv_off, V + kv_off, stride_kn, offs_m,
                                      0, n_free, len_k, diag, qk_scale, HEAD_DIM, BLOCK_N,
                                      False, CAUSAL)
    acc, l_i, m_i = _ragged_fwd_inner(acc, l_i, m_i, q, K + kv_off, V + kv_off, stride_kn, offs_m,
                                      n_free, hi, len_k, diag, qk_scale, HEAD_DIM, BLOCK_N,
                                      True, CAUSAL)
    empty = l_i == 0.0  # no key: o = 0, lse = +inf
    o = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse = tl.where(empty, float("inf"), (m_i + tl.math.log2(tl.where(empty, 1.0, l_i))) * LN2)
    tl.store(O + q_off + rows, o.to(O.dtype.element_ty), mask=row_ok[:, None])
    lse_off = off_b.to(tl.int64) * stride_lb + off_h.to(tl.int64) * stride_lh + q_start
    tl.store(LSE + lse_off + offs_m, lse, mask=row_ok)
    # END SOLUTION


def ragged_forward(q: Tensor, k: Tensor, v: Tensor, layout: RaggedLayout, causal: bool,
                   scale: float, cfg: BlockConfig) -> tuple[Tensor, Tensor]:
    """Launch _ragged_fwd_kernel on contiguous q, k, v described by layout.

    Returns o (like q) and lse (layout.lse_shape(q.shape[0]), fp32, natural log, +inf on rows with
    no key). Tiles: any cfg (no divisibility needed between block_m and block_n).
    """
    # BEGIN SOLUTION
    o = torch.empty_like(q)
    lse = torch.empty(layout.lse_shape(q.shape[0]), dtype=torch.float32, device=q.device)
    cu_q, cu_k = layout.seq_args(q.device)
    grid = (triton.cdiv(max(layout.max_len_q, 1), cfg.block_m), layout.batch * layout.heads)
    _ragged_fwd_kernel[grid](
        q, k, v, o, lse, cu_q, cu_k, *layout.q_strides, *layout.k_strides, *layout.lse_strides,
        layout.heads, layout.max_len_q, layout.max_len_k, scale * 1.4426950408889634,
        GROUP=layout.group, HEAD_DIM=layout.head_dim, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        CAUSAL=causal, VARLEN=layout.varlen, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return o, lse
    # END SOLUTION
