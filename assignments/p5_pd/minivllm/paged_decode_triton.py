"""Triton paged-decode kernel: one query token per sequence reads K/V straight from the block pool.

Given (not graded): the fast decode path on CUDA. One program per (sequence, kv head) walks the
sequence's block table with an online softmax, so no gathered copy of the context is materialised.
It runs under TRITON_INTERPRET=1 on CPU too (slowly), which is how it can be checked without a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _paged_decode_kernel(
    Q, K, V, O, Tables, Lens, scale,
    stride_qb, stride_qh, stride_kn, stride_kt, stride_kh, stride_tb, stride_ob, stride_oh,
    GROUP: tl.constexpr, GROUP_ROWS: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_D: tl.constexpr, TILE: tl.constexpr,
):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    g = tl.arange(0, GROUP_ROWS)  # the query heads sharing this kv head, padded to >= 16 rows for tl.dot
    g_mask = g < GROUP
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    q_offs = b * stride_qb + (kv_head * GROUP + g)[:, None] * stride_qh + d[None, :]
    q = tl.load(Q + q_offs, mask=g_mask[:, None] & d_mask[None, :], other=0.0)  # (GROUP_ROWS, BLOCK_D)
    ctx = tl.load(Lens + b)
    j = tl.arange(0, TILE)  # token index inside a tile of TILE // BLOCK_SIZE blocks
    m = tl.full([GROUP_ROWS], float("-inf"), dtype=tl.float32)  # running max of the scores
    l = tl.zeros([GROUP_ROWS], dtype=tl.float32)  # running sum of exp(score - m)
    acc = tl.zeros([GROUP_ROWS, BLOCK_D], dtype=tl.float32)
    for start in range(0, tl.cdiv(ctx, TILE)):
        tok = start * TILE + j
        t_mask = tok < ctx
        block = tl.load(Tables + b * stride_tb + tok // BLOCK_SIZE, mask=t_mask, other=0).to(tl.int64)
        offs = block[:, None] * stride_kn + (tok % BLOCK_SIZE)[:, None] * stride_kt + kv_head * stride_kh + d[None, :]
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(K + offs, mask=kv_mask, other=0.0)  # (TILE, BLOCK_D)
        s = tl.dot(q, tl.trans(k)).to(tl.float32) * scale  # (GROUP_ROWS, TILE)
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m - m_new)
        v = tl.load(V + offs, mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v).to(tl.float32)
        l = l * alpha + tl.sum(p, axis=1)
        m = m_new
    out = acc / l[:, None]
    o_offs = b * stride_ob + (kv_head * GROUP + g)[:, None] * stride_oh + d[None, :]
    tl.store(O + o_offs, out.to(O.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])


def paged_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor,
                 scale: float) -> Tensor:
    """q: (B, H, D), one token per sequence; caches (num_blocks, block_size, Hkv, D) with unit stride
    in D; block_tables (B, max_blocks) int32; context_lens (B,) int32. Returns (B, H, D).

    One program per (sequence, kv head) serves all query heads of its group, reading each K/V tile
    once, in tiles of at least 64 tokens (several blocks gathered at once) to keep loads wide.
    """
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride() != k_cache.stride():
        raise ValueError("paged_decode needs unit stride in head_dim and identical K/V cache layouts")
    group = num_heads // num_kv_heads
    out = torch.empty_like(q)
    _paged_decode_kernel[(num_seqs, num_kv_heads)](
        q, k_cache, v_cache, out, block_tables, context_lens, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), out.stride(0), out.stride(1),
        GROUP=group, GROUP_ROWS=max(16, triton.next_power_of_2(group)), BLOCK_SIZE=block_size,
        HEAD_DIM=head_dim, BLOCK_D=max(16, triton.next_power_of_2(head_dim)), TILE=max(64, block_size),
    )
    return out
