"""FlashAttention-2 forward in Triton: one program per (query tile, batch * head).

Each program keeps its query tile Q_i in registers and streams key/value tiles K_j, V_j, holding
for every row a running max m, a running normalizer l and an unnormalized output acc:

    S = Q_i K_j^T * scale          m' = max(m, rowmax(S))         P = exp(S - m')
    l' = l * exp(m - m') + rowsum(P)                              acc' = acc * exp(m - m') + P V_j

and at the end O_i = acc / l, LSE_i = m + log(l). The kernels work in base 2 (exp2 is one
instruction): logits are scaled by scale * log2(e) and the saved LSE is converted back to base e.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from flashattn.config import AttnShape, BlockConfig, forward_config
from flashattn.layout import RaggedLayout
from flashattn.ragged_forward import ragged_forward

LOG2E = tl.constexpr(1.4426950408889634)  # log2(e): exp(x) = exp2(x * LOG2E)
LN2 = tl.constexpr(0.6931471805599453)  # ln(2): log(x) = log2(x) * LN2


@triton.jit
def _fwd_inner(
    acc, l_i, m_i,  # running state of the query tile: (BLOCK_M, D) fp32, (BLOCK_M,), (BLOCK_M,)
    q,  # (BLOCK_M, D) query tile
    k_base, v_base,  # pointers to this (batch, kv head)'s K and V, each (N, D) contiguous
    offs_m,  # (BLOCK_M,) query row indices
    lo, hi, N,  # fold key rows [lo, hi) in tiles of BLOCK_N; N is the sequence length
    qk_scale,  # softmax scale * log2(e)
    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,  # mask keys after the query (tiles on the diagonal)
    KEY_MASK: tl.constexpr,  # mask keys >= N (a ragged last tile)
):
    """Fold key tiles [lo, hi) into (acc, l_i, m_i) with the online-softmax update; return them.

    lo is a multiple of BLOCK_N. Masked scores must be -inf before the row max is taken.
    """
    raise NotImplementedError("p6.7: _fwd_inner")


@triton.jit
def _attn_fwd_kernel(
    Q, K, V, O, LSE,  # contiguous (B, H, N, D), (B, H_kv, N, D) x2, (B, H, N, D), (B, H, N) fp32
    H, N, qk_scale,
    GROUP: tl.constexpr,  # H // H_kv
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """Grid (cdiv(N, BLOCK_M), B * H): one query tile of one (batch, head) per program.

    Write O (in O's dtype) and LSE = log(sum_j exp(s_ij)) in natural log for rows < N only.
    Causal: key tiles entirely below the diagonal need no mask; only the band [start, start +
    BLOCK_M) does; key tiles after it are skipped. Use 64-bit base offsets.
    """
    raise NotImplementedError("p6.8: _attn_fwd_kernel")


def flash_attn_forward(
    q: Tensor, k: Tensor, v: Tensor, causal: bool = False, sm_scale: float | None = None,
    config: BlockConfig | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention output and log-sum-exp, without materializing the N x N score matrix.

    Args:
        q: (B, H, N_q, d); k, v: (B, H_kv, N_k, d) with H % H_kv == 0; fp16, bf16 or fp32, any
            strides (copied to contiguous if needed); d in (16, 32, 64, 128). N_q == N_k runs
            _attn_fwd_kernel; N_q != N_k runs ragged_forward.py's kernel.
        causal: aligned bottom-right: query i attends to keys j <= i + N_k - N_q (j <= i when
            N_q == N_k). A query that sees no key gets o = 0 and lse = +inf.
        sm_scale: softmax scale, default 1 / sqrt(d).
        config: tiles (default: config.forward_config); block_m must be a multiple of block_n.

    Returns:
        o: (B, H, N_q, d) in q's dtype, o_i = sum_j softmax_j(s_i) v_j, s_ij = sm_scale q_i.k_j.
        lse: (B, H, N_q) fp32, lse_i = log(sum_j exp(s_ij)) (natural log, masked keys excluded).
    """
    shape = AttnShape.of(q, k, v)
    scale = 1.0 / math.sqrt(shape.head_dim) if sm_scale is None else float(sm_scale)
    cfg = config or forward_config(shape.head_dim, q.is_cuda, q.dtype)
    if cfg.block_m % cfg.block_n:
        raise ValueError(f"forward needs block_m % block_n == 0, got {cfg}")
    raise NotImplementedError("p6.9: flash_attn_forward")
