"""Paged decode attention with split-KV ("flash-decoding"): one new query token per sequence
attends to its whole context, read straight from a paged KV cache.

Layout (the one stage 5 builds and P1 serves from):
    q             (B, H, D)                     one query token per sequence
    k/v_cache     (num_blocks, block_size, Hkv, D)   a pool of KV blocks (unit stride in D)
    block_tables  (B, max_blocks) int32         row b lists sequence b's blocks in token order
    context_lens  (B,) int32                    tokens of sequence b, >= 1

Token t of sequence b lives in block block_tables[b, t // block_size] at offset t % block_size.
Query head h reads KV head h // (H // Hkv) (grouped-query attention).

A decode batch is small (B x Hkv programs can be fewer than the SMs) while each context is long,
so one program per (sequence, KV head) leaves most of the GPU idle. Split-KV cuts each context
into splits of `split_tokens` tokens handled by separate programs (phase 1), each producing an
attention output normalised within its split and the log-sum-exp of its scores; phase 2 merges
the splits exactly:

    lse   = log sum_s exp(lse_s),    out = sum_s exp(lse_s - lse) * out_s
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from tritonkernels.launch import check_float


@triton.jit
def _split_kernel(
    Q, K, V, Partial, Lse, Tables, Lens, scale,
    stride_qb, stride_qh,  # q (B, H, D), unit stride in D
    stride_kn, stride_kt, stride_kh,  # k/v caches (num_blocks, block_size, Hkv, D), unit stride in D
    stride_tb,  # block_tables (B, max_blocks)
    stride_pb, stride_ph, stride_ps,  # partial (B, H, S, D) fp32, unit stride in D
    stride_lb, stride_lh,  # lse (B, H, S) fp32, unit stride in S
    GROUP: tl.constexpr,  # query heads per KV head
    GROUP_ROWS: tl.constexpr,  # GROUP padded to a power of two >= 16 (tl.dot's smallest tile)
    BLOCK_SIZE: tl.constexpr,  # tokens per KV block
    HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,  # HEAD_DIM padded to a power of two >= 16
    SPLIT_TOKENS: tl.constexpr,  # tokens per split, a power of two >= 16
    TILE: tl.constexpr,  # tokens per loop iteration, a power of two dividing SPLIT_TOKENS
    IEEE: tl.constexpr,  # fp32 inputs: exact fp32 dot products (not TF32)
):
    """Program (b, kv_head, s) handles split s of sequence b for the GROUP query heads of kv_head.

    Split s covers tokens [s * SPLIT_TOKENS, min((s + 1) * SPLIT_TOKENS, ctx)). It writes
    Partial[b, h, s] = softmax(scale * q_h . k_t) over those tokens, times v_t, summed (fp32), and
    Lse[b, h, s] = log sum_t exp(scale * q_h . k_t). A split with no tokens (s * SPLIT_TOKENS >= ctx)
    writes 0 and -inf. Tokens past ctx, padded head dims and padded group rows must be neutral, and
    block table entries past the context must not be read.
    """
    # BEGIN SOLUTION
    b = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    g = tl.arange(0, GROUP_ROWS)
    g_mask = g < GROUP
    heads = kv_head * GROUP + g
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    q = tl.load(Q + b * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)  # (GROUP_ROWS, BLOCK_D)
    ctx = tl.load(Lens + b)
    begin = split * SPLIT_TOKENS
    end = tl.minimum(begin + SPLIT_TOKENS, ctx)
    j = tl.arange(0, TILE)
    m = tl.full([GROUP_ROWS], float("-inf"), dtype=tl.float32)  # running max of the scores
    l = tl.zeros([GROUP_ROWS], dtype=tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([GROUP_ROWS, BLOCK_D], dtype=tl.float32)
    for start in range(begin, end, TILE):
        tok = start + j
        t_mask = tok < end
        block = tl.load(Tables + b * stride_tb + tok // BLOCK_SIZE, mask=t_mask, other=0).to(tl.int64)
        offs = block[:, None] * stride_kn + (tok % BLOCK_SIZE)[:, None] * stride_kt \
            + kv_head * stride_kh + d[None, :]
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(K + offs, mask=kv_mask, other=0.0)  # (TILE, BLOCK_D)
        if IEEE:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(t_mask[None, :], s.to(tl.float32) * scale, float("-inf"))  # (GROUP_ROWS, TILE)
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        v = tl.load(V + offs, mask=kv_mask, other=0.0)
        if IEEE:
            pv = tl.dot(p, v, input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv.to(tl.float32)
        l = l * alpha + tl.sum(p, axis=1)
        m = m_new
    has = l > 0
    out = acc / tl.where(has, l, 1.0)[:, None]
    lse = tl.where(has, m + tl.log(tl.where(has, l, 1.0)), float("-inf"))
    row_mask = g_mask[:, None] & d_mask[None, :]
    tl.store(Partial + b * stride_pb + heads[:, None] * stride_ph + split * stride_ps + d[None, :], out,
             mask=row_mask)
    tl.store(Lse + b * stride_lb + heads * stride_lh + split, lse, mask=g_mask)
    # END SOLUTION


@triton.jit
def _combine_kernel(
    Partial, Lse, Out,
    stride_pb, stride_ph, stride_ps,  # partial (B, H, S, D) fp32, unit stride in D
    stride_lb, stride_lh,  # lse (B, H, S) fp32, unit stride in S
    stride_ob, stride_oh,  # out (B, H, D), unit stride in D
    NUM_SPLITS, HEAD_DIM,
    BLOCK_S: tl.constexpr,  # NUM_SPLITS padded to a power of two
    BLOCK_D: tl.constexpr,  # HEAD_DIM padded to a power of two
):
    """Program (b, h) merges the NUM_SPLITS partial results of query head h of sequence b into
    Out[b, h] (stored in Out's dtype). Splits with lse = -inf carry no weight; at least one split
    of each row is finite. Large lse values (1e3 and more) must not overflow."""
    # BEGIN SOLUTION
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    s = tl.arange(0, BLOCK_S)
    s_mask = s < NUM_SPLITS
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    lse = tl.load(Lse + b * stride_lb + h * stride_lh + s, mask=s_mask, other=float("-inf"))
    w = tl.exp(lse - tl.max(lse, axis=0))  # (BLOCK_S,), 0 for empty and padded splits
    part = tl.load(Partial + b * stride_pb + h * stride_ph + s[:, None] * stride_ps + d[None, :],
                   mask=s_mask[:, None] & d_mask[None, :], other=0.0)
    out = tl.sum(part * w[:, None], axis=0) / tl.sum(w, axis=0)
    tl.store(Out + b * stride_ob + h * stride_oh + d, out.to(Out.dtype.element_ty), mask=d_mask)
    # END SOLUTION


def _check(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor,
           split_tokens: int) -> None:
    """Shapes, dtypes and layouts the kernels rely on, each with a clear message."""
    check_float("q", q)
    if q.dim() != 3 or k_cache.dim() != 4:
        raise ValueError(f"expected q (B, H, D) and caches (num_blocks, block_size, Hkv, D), "
                         f"got {tuple(q.shape)} and {tuple(k_cache.shape)}")
    if v_cache.shape != k_cache.shape or v_cache.stride() != k_cache.stride():
        raise ValueError("k_cache and v_cache must have the same shape and strides")
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"q, k_cache and v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim or num_heads % num_kv_heads:
        raise ValueError(f"head_dim {k_cache.shape[3]} != {head_dim}, or {num_heads} query heads "
                         f"are not a multiple of {num_kv_heads} KV heads")
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1:
        raise ValueError("q and the caches need unit stride in head_dim")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError("block_tables and context_lens must be int32")
    if block_tables.dim() != 2 or block_tables.shape[0] != q.shape[0] or context_lens.shape != (q.shape[0],):
        raise ValueError(f"block_tables must be (B, max_blocks) and context_lens (B,) for B = {q.shape[0]}")
    if split_tokens < 16 or split_tokens & (split_tokens - 1):
        raise ValueError(f"split_tokens must be a power of two >= 16, got {split_tokens}")


def num_splits_for(block_tables: Tensor, block_size: int, split_tokens: int) -> int:
    """Splits per sequence: enough for the longest context the block tables can hold."""
    return max(1, triton.cdiv(block_tables.shape[1] * block_size, split_tokens))


def paged_decode_split(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor,
                       context_lens: Tensor, scale: float, split_tokens: int) -> tuple[Tensor, Tensor]:
    """Phase 1: attention of each split on its own.

    Returns (partial, lse): partial (B, H, S, D) fp32 and lse (B, H, S) fp32, contiguous, with
    S = num_splits_for(block_tables, block_size, split_tokens); the contract of `_split_kernel`.
    Every input may be a strided view (q and the caches with unit stride in D; block_tables and
    context_lens with any strides).
    """
    _check(q, k_cache, v_cache, block_tables, context_lens, split_tokens)
    # BEGIN SOLUTION
    # the kernel indexes a table row and the lengths with unit stride: small int32 copies if views
    block_tables, context_lens = block_tables.contiguous(), context_lens.contiguous()
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    splits = num_splits_for(block_tables, block_size, split_tokens)
    partial = torch.empty((num_seqs, num_heads, splits, head_dim), dtype=torch.float32, device=q.device)
    lse = torch.empty((num_seqs, num_heads, splits), dtype=torch.float32, device=q.device)
    group = num_heads // num_kv_heads
    _split_kernel[(num_seqs, num_kv_heads, splits)](
        q, k_cache, v_cache, partial, lse, block_tables, context_lens, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), partial.stride(0), partial.stride(1), partial.stride(2),
        lse.stride(0), lse.stride(1),
        GROUP=group, GROUP_ROWS=max(16, triton.next_power_of_2(group)), BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        SPLIT_TOKENS=split_tokens, TILE=min(split_tokens, 64), IEEE=q.dtype == torch.float32,
    )
    return partial, lse
    # END SOLUTION


def combine_splits(partial: Tensor, lse: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """Phase 2: merge the splits of `paged_decode_split` into (B, H, D) of `dtype`.

    partial (B, H, S, D) fp32 and lse (B, H, S) fp32, both with unit stride in the last dim; each
    (b, h) has at least one finite lse.
    """
    if partial.dim() != 4 or lse.shape != partial.shape[:3]:
        raise ValueError(f"expected partial (B, H, S, D) and lse (B, H, S), got {tuple(partial.shape)} "
                         f"and {tuple(lse.shape)}")
    if partial.dtype != torch.float32 or lse.dtype != torch.float32:
        raise ValueError("partial and lse must be float32")
    if partial.stride(-1) != 1 or lse.stride(-1) != 1:
        raise ValueError("partial and lse need unit stride in their last dim")
    # BEGIN SOLUTION
    num_seqs, num_heads, splits, head_dim = partial.shape
    out = torch.empty((num_seqs, num_heads, head_dim), dtype=dtype, device=partial.device)
    _combine_kernel[(num_seqs, num_heads)](
        partial, lse, out,
        partial.stride(0), partial.stride(1), partial.stride(2), lse.stride(0), lse.stride(1),
        out.stride(0), out.stride(1), splits, head_dim,
        BLOCK_S=max(2, triton.next_power_of_2(splits)), BLOCK_D=triton.next_power_of_2(head_dim),
    )
    return out
    # END SOLUTION


def paged_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor,
                 scale: float, split_tokens: int = 256) -> Tensor:
    """Decode attention over a paged KV cache: (B, H, D) in q's dtype, phase 1 then phase 2.

    out[b, h] = softmax(scale * q[b, h] . K_b^T) V_b over the context_lens[b] tokens of sequence b.
    """
    # BEGIN SOLUTION
    partial, lse = paged_decode_split(q, k_cache, v_cache, block_tables, context_lens, scale, split_tokens)
    return combine_splits(partial, lse, q.dtype)
    # END SOLUTION
