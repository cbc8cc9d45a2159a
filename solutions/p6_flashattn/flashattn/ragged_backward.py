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
    # BEGIN SOLUTION
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    q_start, len_q, _, _ = sequence_bounds(CU_Q, CU_K, off_b, LEN_Q, LEN_K, VARLEN)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    base = (off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
            + q_start.to(tl.int64) * stride_qm)
    ptrs = base + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
    row_ok = offs_m < len_q
    o = tl.load(O + ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    d_off = off_b.to(tl.int64) * stride_lb + off_h.to(tl.int64) * stride_lh + q_start
    tl.store(Delta + d_off + offs_m, tl.sum(o * do, axis=1), mask=row_ok)
    # END SOLUTION


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
    # BEGIN SOLUTION
    offs_d = tl.arange(0, HEAD_DIM)
    offs_mb = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + offs_mb
        row_ok = offs_m < len_q
        rows = offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
        q = tl.load(q_base + rows, mask=row_ok[:, None], other=0.0)
        do = tl.load(do_base + rows, mask=row_ok[:, None], other=0.0)
        lse2 = tl.load(lse_base + offs_m, mask=row_ok, other=float("inf")) * LOG2E
        delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q)) * qk_scale  # (BLOCK_N, BLOCK_M), base 2
        p_t = tl.math.exp2(s_t - lse2[None, :])
        if MASK:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :] + diag, p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        dp_t = tl.dot(v, tl.trans(do))  # (BLOCK_N, BLOCK_M)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv
    # END SOLUTION


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
    # BEGIN SOLUTION
    start_n = tl.program_id(0) * BLOCK_N
    h_kv = H // GROUP
    off_b = tl.program_id(1) // h_kv
    off_hkv = tl.program_id(1) % h_kv
    q_start, len_q, k_start, len_k = sequence_bounds(CU_Q, CU_K, off_b, LEN_Q, LEN_K, VARLEN)
    if start_n >= len_k:
        return
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_off = (off_b.to(tl.int64) * stride_kb + off_hkv.to(tl.int64) * stride_kh
              + (k_start + offs_n)[:, None].to(tl.int64) * stride_kn + offs_d[None, :])
    key_ok = offs_n[:, None] < len_k
    k = tl.load(K + kv_off, mask=key_ok, other=0.0)
    v = tl.load(V + kv_off, mask=key_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    diag = len_k - len_q
    if CAUSAL:
        lo = tl.minimum(tl.maximum(start_n - diag, 0), len_q)  # first query seeing key start_n
        band_end = tl.minimum(tl.maximum(start_n + BLOCK_N - diag, 0), len_q)
        # whole query tiles: the masked loop steps BLOCK_M rows past band_end otherwise
        band_end = lo + tl.cdiv(band_end - lo, BLOCK_M) * BLOCK_M
    else:
        lo = 0
        band_end = 0
    for g in range(GROUP):
        off_h = (off_hkv * GROUP + g).to(tl.int64)
        q_off = (off_b.to(tl.int64) * stride_qb + off_h * stride_qh
                 + q_start.to(tl.int64) * stride_qm)
        l_off = off_b.to(tl.int64) * stride_lb + off_h * stride_lh + q_start
        if CAUSAL:
            dk, dv = _ragged_dkdv_inner(dk, dv, k, v, Q + q_off, DO + q_off, stride_qm,
                                        LSE + l_off, Delta + l_off, offs_n, lo, band_end, len_q,
                                        diag, qk_scale, HEAD_DIM, BLOCK_M, True)
        dk, dv = _ragged_dkdv_inner(dk, dv, k, v, Q + q_off, DO + q_off, stride_qm, LSE + l_off,
                                    Delta + l_off, offs_n, band_end, len_q, len_q, diag, qk_scale,
                                    HEAD_DIM, BLOCK_M, False)
    dk *= sm_scale
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=key_ok)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=key_ok)
    # END SOLUTION


@triton.jit
def _ragged_dq_inner(
    dq, q, do, lse2, delta,  # (BLOCK_M, D) fp32 accumulator; the fixed query tile and its rows
    k_base, v_base, stride_kn, offs_m, lo, hi, len_k, diag, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    MASK: tl.constexpr,  # mask keys >= len_k and, if CAUSAL, keys j > i + diag
    CAUSAL: tl.constexpr,
):
    """Accumulate dQ += dS K (unscaled) over key tiles [lo, hi); return it."""
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
        p = tl.math.exp2(s - lse2[:, None])
        if MASK:
            ok = cols[None, :] < len_k
            if CAUSAL:
                ok = ok & (cols[None, :] <= offs_m[:, None] + diag)
            p = tl.where(ok, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq
    # END SOLUTION


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
    # BEGIN SOLUTION
    if CAUSAL:
        start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    else:
        start_m = tl.program_id(0) * BLOCK_M
    off_b = tl.program_id(1) // H
    off_h = tl.program_id(1) % H
    q_start, len_q, k_start, len_k = sequence_bounds(CU_Q, CU_K, off_b, LEN_Q, LEN_K, VARLEN)
    if start_m >= len_q:
        return
    q_off = (off_b.to(tl.int64) * stride_qb + off_h.to(tl.int64) * stride_qh
             + q_start.to(tl.int64) * stride_qm)
    kv_off = (off_b.to(tl.int64) * stride_kb + (off_h // GROUP).to(tl.int64) * stride_kh
              + k_start.to(tl.int64) * stride_kn)
    l_off = off_b.to(tl.int64) * stride_lb + off_h.to(tl.int64) * stride_lh + q_start
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < len_q
    rows = offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :]
    q = tl.load(Q + q_off + rows, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + q_off + rows, mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(LSE + l_off + offs_m, mask=row_ok, other=float("inf")) * LOG2E
    delta = tl.load(Delta + l_off + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    diag = len_k - len_q
    if CAUSAL:
        hi = tl.minimum(tl.maximum(start_m + BLOCK_M + diag, 0), len_k)
        n_free = tl.minimum(tl.maximum(start_m + diag + 1, 0), len_k) // BLOCK_N * BLOCK_N
    else:
        hi = len_k
        n_free = len_k // BLOCK_N * BLOCK_N
    dq = _ragged_dq_inner(dq, q, do, lse2, delta, K + kv_off, V + kv_off, stride_kn, offs_m, 0,
                          n_free, len_k, diag, qk_scale, HEAD_DIM, BLOCK_N, False, CAUSAL)
    dq = _ragged_dq_inner(dq, q, do, lse2, delta, K + kv_off, V + kv_off, stride_kn, offs_m,
                          n_free, hi, len_k, diag, qk_scale, HEAD_DIM, BLOCK_N, True, CAUSAL)
    dq *= sm_scale
    tl.store(DQ + q_off + rows, dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])
    # END SOLUTION


def ragged_backward(do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
                    layout: RaggedLayout, causal: bool, scale: float,
                    configs: tuple[BlockConfig, BlockConfig]) -> tuple[Tensor, Tensor, Tensor]:
    """Launch the delta, dK/dV and dQ kernels on contiguous tensors described by layout.

    Returns dq (like q), dk and dv (like k). configs: (dK/dV tiles, dQ tiles), any sizes.
    """
    # BEGIN SOLUTION
    delta = torch.empty_like(lse)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    cu_q, cu_k = layout.seq_args(q.device)
    seqs = (layout.heads, layout.max_len_q, layout.max_len_k)
    strides = (*layout.q_strides, *layout.k_strides, *layout.lse_strides)
    q_tiles = max(layout.max_len_q, 1)
    _ragged_delta_kernel[(triton.cdiv(q_tiles, 64), layout.batch * layout.heads)](
        o, do, delta, cu_q, cu_k, *layout.q_strides, *layout.lse_strides, *seqs,
        HEAD_DIM=layout.head_dim, BLOCK_M=64, VARLEN=layout.varlen)
    qk_scale = scale * 1.4426950408889634
    common = dict(GROUP=layout.group, HEAD_DIM=layout.head_dim, CAUSAL=causal,
                  VARLEN=layout.varlen)
    cfg_kv, cfg_q = configs
    _ragged_dkdv_kernel[(triton.cdiv(max(layout.max_len_k, 1), cfg_kv.block_n),
                         layout.batch * layout.kv_heads)](
        q, k, v, do, lse, delta, dk, dv, cu_q, cu_k, *strides, *seqs, qk_scale, scale,
        BLOCK_M=cfg_kv.block_m, BLOCK_N=cfg_kv.block_n, **common,
        num_warps=cfg_kv.num_warps, num_stages=cfg_kv.num_stages,
    )
    _ragged_dq_kernel[(triton.cdiv(q_tiles, cfg_q.block_m), layout.batch * layout.heads)](
        q, k, v, do, lse, delta, dq, cu_q, cu_k, *strides, *seqs, qk_scale, scale,
        BLOCK_M=cfg_q.block_m, BLOCK_N=cfg_q.block_n, **common,
        num_warps=cfg_q.num_warps, num_stages=cfg_q.num_stages,
    )
    return dq, dk, dv
    # END SOLUTION
