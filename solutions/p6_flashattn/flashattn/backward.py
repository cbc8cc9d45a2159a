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
    # BEGIN SOLUTION
    off_bh = tl.program_id(1).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    ptrs = off_bh * N * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    mask = offs_m[:, None] < N
    o = tl.load(O + ptrs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(Delta + off_bh * N + offs_m, tl.sum(o * do, axis=1), mask=offs_m < N)
    # END SOLUTION


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
    # BEGIN SOLUTION
    offs_d = tl.arange(0, HEAD_DIM)
    offs_mb = tl.arange(0, BLOCK_M)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + offs_mb
        row_ok = offs_m < N
        q = tl.load(q_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None],
                    other=0.0)
        do = tl.load(do_base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                     mask=row_ok[:, None], other=0.0)
        lse2 = tl.load(lse_base + offs_m, mask=row_ok, other=float("inf")) * LOG2E
        delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
        s_t = tl.dot(k, tl.trans(q)) * qk_scale  # (BLOCK_N, BLOCK_M), base 2
        p_t = tl.math.exp2(s_t - lse2[None, :])
        if CAUSAL_MASK:
            p_t = tl.where(offs_m[None, :] >= offs_n[:, None], p_t, 0.0)
        dv += tl.dot(p_t.to(do.dtype), do)
        dp_t = tl.dot(v, tl.trans(do))  # (BLOCK_N, BLOCK_M)
        ds_t = p_t * (dp_t - delta[None, :])
        dk += tl.dot(ds_t.to(q.dtype), q)
    return dk, dv
    # END SOLUTION


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
    # BEGIN SOLUTION
    start_n = tl.program_id(0) * BLOCK_N
    off_bkv = tl.program_id(1)
    h_kv = H // GROUP
    off_b = off_bkv // h_kv
    off_hkv = off_bkv % h_kv
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv_off = off_bkv.to(tl.int64) * N * HEAD_DIM + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    key_ok = offs_n[:, None] < N
    k = tl.load(K + kv_off, mask=key_ok, other=0.0)
    v = tl.load(V + kv_off, mask=key_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    for g in range(GROUP):
        bh = (off_b * H + off_hkv * GROUP + g).to(tl.int64)
        q_base = Q + bh * N * HEAD_DIM
        do_base = DO + bh * N * HEAD_DIM
        if CAUSAL:
            band_end = tl.minimum(start_n + BLOCK_N, N)
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, LSE + bh * N, Delta + bh * N,
                                     offs_n, start_n, band_end, N, qk_scale,
                                     HEAD_DIM, BLOCK_M, True)
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, LSE + bh * N, Delta + bh * N,
                                     offs_n, band_end, N, N, qk_scale, HEAD_DIM, BLOCK_M, False)
        else:
            dk, dv = _bwd_dkdv_inner(dk, dv, k, v, q_base, do_base, LSE + bh * N, Delta + bh * N,
                                     offs_n, 0, N, N, qk_scale, HEAD_DIM, BLOCK_M, False)
    dk *= sm_scale
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=key_ok)
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=key_ok)
    # END SOLUTION


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
    # BEGIN SOLUTION
    offs_d = tl.arange(0, HEAD_DIM)
    offs_nb = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_nb
        if KEY_MASK or CAUSAL_MASK:
            k = tl.load(k_base + cols[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=cols[:, None] < N, other=0.0)
            v = tl.load(v_base + cols[:, None] * HEAD_DIM + offs_d[None, :],
                        mask=cols[:, None] < N, other=0.0)
        else:
            k = tl.load(k_base + cols[:, None] * HEAD_DIM + offs_d[None, :])
            v = tl.load(v_base + cols[:, None] * HEAD_DIM + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale  # (BLOCK_M, BLOCK_N), base 2
        p = tl.math.exp2(s - lse2[:, None])
        if CAUSAL_MASK:
            p = tl.where(offs_m[:, None] >= cols[None, :], p, 0.0)
        if KEY_MASK:
            p = tl.where(cols[None, :] < N, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq
    # END SOLUTION


@triton.jit
def _bwd_dq_kernel(
    Q, K, V, DO, LSE, Delta, DQ,
    H, N, qk_scale, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """Grid (cdiv(N, BLOCK_M), B * H): dQ of one query tile. Causal: unmasked key tiles before
    the diagonal band, masked ones inside it, none after."""
    # BEGIN SOLUTION
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // H
    off_hkv = (off_bh % H) // GROUP
    kv_bh = (off_b * (H // GROUP) + off_hkv).to(tl.int64)
    k_base = K + kv_bh * N * HEAD_DIM
    v_base = V + kv_bh * N * HEAD_DIM
    bh = off_bh.to(tl.int64)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N
    q_off = bh * N * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + q_off, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + q_off, mask=row_ok[:, None], other=0.0)
    lse2 = tl.load(LSE + bh * N + offs_m, mask=row_ok, other=float("inf")) * LOG2E
    delta = tl.load(Delta + bh * N + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        lo = start_m * BLOCK_M
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, 0, lo, N, qk_scale,
                           HEAD_DIM, BLOCK_N, False, False)
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, lo,
                           tl.minimum(lo + BLOCK_M, N), N, qk_scale, HEAD_DIM, BLOCK_N, True, True)
    else:
        n_full = (N // BLOCK_N) * BLOCK_N
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, 0, n_full, N,
                           qk_scale, HEAD_DIM, BLOCK_N, False, False)
        dq = _bwd_dq_inner(dq, q, do, lse2, delta, k_base, v_base, offs_m, n_full, N, N,
                           qk_scale, HEAD_DIM, BLOCK_N, False, True)
    dq *= sm_scale
    tl.store(DQ + q_off, dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])
    # END SOLUTION


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
    # BEGIN SOLUTION
    if shape.kv_seq_len != shape.seq_len:  # N_q != N_k: ragged_backward.py's kernels
        do, q, k, v, o, lse = (t.contiguous() for t in (do, q, k, v, o, lse))
        return ragged_backward(do, q, k, v, o, lse, RaggedLayout.fixed(q, k), causal, scale,
                               (cfg_kv, cfg_q))
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.contiguous()
    b, h, n, d = q.shape
    delta = torch.empty_like(lse)
    _bwd_delta_kernel[(triton.cdiv(n, 64), b * h)](o, do, delta, n, HEAD_DIM=d, BLOCK_M=64)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    qk_scale = scale * 1.4426950408889634
    common = dict(GROUP=shape.group, HEAD_DIM=d, CAUSAL=causal)
    _bwd_dkdv_kernel[(triton.cdiv(n, cfg_kv.block_n), b * shape.kv_heads)](
        q, k, v, do, lse, delta, dk, dv, h, n, qk_scale, scale,
        BLOCK_M=cfg_kv.block_m, BLOCK_N=cfg_kv.block_n, **common,
        num_warps=cfg_kv.num_warps, num_stages=cfg_kv.num_stages,
    )
    _bwd_dq_kernel[(triton.cdiv(n, cfg_q.block_m), b * h)](
        q, k, v, do, lse, delta, dq, h, n, qk_scale, scale,
        BLOCK_M=cfg_q.block_m, BLOCK_N=cfg_q.block_n, **common,
        num_warps=cfg_q.num_warps, num_stages=cfg_q.num_stages,
    )
    return dq, dk, dv
    # END SOLUTION
