"""Variable-length packed batches, the interface of flash_attn_varlen_func.

B sequences of different lengths are packed back to back with no padding: q (total_q, H, d),
k and v (total_k, H_kv, d); sequence b owns query rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] and key
rows cu_seqlens_k[b]:cu_seqlens_k[b + 1] (int32, (B + 1,), starting at 0). Each sequence attends
only to its own keys, causal aligned bottom-right within it; an empty sequence (two equal entries)
is allowed. max_seqlen_q, max_seqlen_k bound every length: they size the grid, never a sequence.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from flashattn.config import BlockConfig, backward_configs, forward_config
from flashattn.layout import RaggedLayout
from flashattn.ragged_backward import ragged_backward
from flashattn.ragged_forward import ragged_forward


def _scale(head_dim: int, sm_scale: float | None) -> float:
    return 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)


def flash_attn_varlen_forward(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
    max_seqlen_q: int, max_seqlen_k: int, causal: bool = False, sm_scale: float | None = None,
    config: BlockConfig | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention of each packed sequence over its own keys, and the log-sum-exp.

    Args:
        q: (total_q, H, d); k, v: (total_k, H_kv, d); dtypes and head dims as flash_attn_forward.
        cu_seqlens_q, cu_seqlens_k: int32 (B + 1,) cumulative lengths on q's device.
        max_seqlen_q, max_seqlen_k: at least the longest query and key sequence.
        causal: query i of a sequence attends its keys j <= i + len_k - len_q.
        sm_scale: softmax scale, default 1 / sqrt(d). config: tiles (default forward_config).

    Returns:
        o: (total_q, H, d) in q's dtype; rows with no key are 0.
        lse: (H, total_q) fp32, natural log; +inf on rows with no key.
    """
    layout = RaggedLayout.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    scale = _scale(layout.head_dim, sm_scale)
    cfg = config or forward_config(layout.head_dim, q.is_cuda, q.dtype)
    raise NotImplementedError("p6.23: flash_attn_varlen_forward")


def flash_attn_varlen_backward(
    do: Tensor, q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor,
    cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
    causal: bool = False, sm_scale: float | None = None,
    configs: tuple[BlockConfig, BlockConfig] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """dq (total_q, H, d), dk and dv (total_k, H_kv, d) from the forward's o and lse (H, total_q).

    Gradients never cross sequences: dk, dv of sequence b sum over sequence b's queries (and, for
    grouped-query attention, over the query heads sharing a KV head) only.
    """
    layout = RaggedLayout.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    scale = _scale(layout.head_dim, sm_scale)
    cfgs = configs or backward_configs(layout.head_dim, q.is_cuda, q.dtype)
    raise NotImplementedError("p6.24: flash_attn_varlen_backward")


class FlashAttentionVarlenFunction(torch.autograd.Function):
    """forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, sm_scale)
    -> o; backward recomputes P from the saved lse."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                sm_scale: float | None = None) -> Tensor:
        """Run flash_attn_varlen_forward; save the tensors the backward needs."""
        raise NotImplementedError("p6.25: FlashAttentionVarlenFunction.forward")

    @staticmethod
    def backward(ctx, do: Tensor):
        """Return (dq, dk, dv) and None for the six other arguments."""
        raise NotImplementedError("p6.26: FlashAttentionVarlenFunction.backward")


def flash_attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor,
                           cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                           causal: bool = False, softmax_scale: float | None = None) -> Tensor:
    """Differentiable attention over a packed batch (flash_attn_varlen_func's interface):
    q (total_q, H, d), k and v (total_k, H_kv, d) -> o (total_q, H, d). Sequence b is
    SDPA over its own rows, with causal aligned bottom-right and rows without keys 0."""
    raise NotImplementedError("p6.27: flash_attention_varlen")
