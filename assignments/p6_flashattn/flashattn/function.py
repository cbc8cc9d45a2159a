"""The autograd wrapper: flash_attention(q, k, v) is differentiable and saves only O and LSE."""

from __future__ import annotations

import torch
from torch import Tensor

from flashattn.backward import flash_attn_backward
from flashattn.forward import flash_attn_forward


class FlashAttentionFunction(torch.autograd.Function):
    """forward(q, k, v, causal, sm_scale) -> o; backward recomputes P from the saved LSE."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                sm_scale: float | None = None) -> Tensor:
        """Run flash_attn_forward; save q, k, v, o and lse (nothing of size N x N)."""
        raise NotImplementedError("p6.10: FlashAttentionFunction.forward")

    @staticmethod
    def backward(ctx, do: Tensor):
        """Return (dq, dk, dv, None, None): no gradient for causal and sm_scale."""
        raise NotImplementedError("p6.11: FlashAttentionFunction.backward")


def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> Tensor:
    """Differentiable attention: q (B, H, N_q, d), k and v (B, H_kv, N_k, d) -> o (B, H, N_q, d).

    Same semantics as torch's scaled_dot_product_attention(q, k, v, is_causal=causal,
    scale=sm_scale, enable_gqa=True) when N_q == N_k, computed by the Triton kernels of this
    package. When N_q != N_k, causal is aligned bottom-right (query i sees keys j <= i + N_k - N_q,
    SDPA's is_causal aligns top-left) and a query that sees no key gets o = 0 and zero gradients.
    """
    raise NotImplementedError("p6.12: flash_attention")
