"""Triton paged-decode kernel: one query token per sequence reads K/V straight from the block pool.

Given (not graded): the fast decode path on CUDA. One program per (sequence, query head) walks the
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
    GROUP: tl.constexpr, BLOCK_SIZE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    kv_head = h // GROUP
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    t = tl.arange(0, BLOCK_SIZE)
    q = tl.load(Q + b * stride_qb + h * stride_qh + d, mask=d_mask, other=0.0).to(tl.float32) * scale
    ctx = tl.load(Lens + b)
    m = -float("inf")  # running max of the scores (fp32 scalar)
    l = 0.0  # running sum of exp(score - m)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(0, tl.cdiv(ctx, BLOCK_SIZE)):
        block = tl.load(Tables + b * stride_tb + i).to(tl.int64)
        t_mask = i * BLOCK_SIZE + t < ctx
        offs = block * stride_kn + t[:, None] * stride_kt + kv_head * stride_kh + d[None, :]
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(K + offs, mask=kv_mask, other=0.0).to(tl.float32)  # (BLOCK_SIZE, BLOCK_D)
        s = tl.where(t_mask, tl.sum(k * q[None, :], axis=1), float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=0))
        p = tl.exp(s - m_new)
        alpha = tl.exp(m - m_new)
        v = tl.load(V + offs, mask=kv_mask, other=0.0).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, axis=0)
        l = l * alpha + tl.sum(p, axis=0)
        m = m_new
    out = acc / l
    tl.store(O + b * stride_ob + h * stride_oh + d, out.to(O.dtype.element_ty), mask=d_mask)


def paged_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor,
                 scale: float) -> Tensor:
    """q: (B, H, D), one token per sequence; caches (num_blocks, block_size, Hkv, D) with unit stride
    in D; block_tables (B, max_blocks) int32; context_lens (B,) int32. Returns (B, H, D)."""
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride() != k_cache.stride():
        raise ValueError("paged_decode needs unit stride in head_dim and identical K/V cache layouts")
    out = torch.empty_like(q)
    _paged_decode_kernel[(num_seqs, num_heads)](
        q, k_cache, v_cache, out, block_tables, context_lens, scale,
        q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        block_tables.stride(0), out.stride(0), out.stride(1),
        GROUP=num_heads // num_kv_heads, BLOCK_SIZE=block_size, HEAD_DIM=head_dim,
        BLOCK_D=triton.next_power_of_2(head_dim),
    )
    return out
