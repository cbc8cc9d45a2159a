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
    raise NotImplementedError("s04.1: _split_kernel")


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
    raise NotImplementedError("s04.2: _combine_kernel")


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
    raise NotImplementedError("s04.3: paged_decode_split")


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
    raise NotImplementedError("s04.4: combine_splits")


def paged_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor,
                 scale: float, split_tokens: int = 256) -> Tensor:
    """Decode attention over a paged KV cache: (B, H, D) in q's dtype, phase 1 then phase 2.

    out[b, h] = softmax(scale * q[b, h] . K_b^T) V_b over the context_lens[b] tokens of sequence b.
    """
    raise NotImplementedError("s04.5: paged_decode")
