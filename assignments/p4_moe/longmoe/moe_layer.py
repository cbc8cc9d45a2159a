"""A DeepSeek-V3 MoE layer: routed SwiGLU experts weighted by the gate, plus shared experts that
every token passes through.

params (all fp32 tensors, transformers' DeepseekV3MoE layout split into named pieces):
  "router.weight" (E, H), "router.bias" (E,)            the gate and its e_score_correction_bias
  "experts.gate" (E, I, H), "experts.up" (E, I, H), "experts.down" (E, H, I)
  "shared.gate" (I_s, H), "shared.up" (I_s, H), "shared.down" (H, I_s)   (optional: no shared expert)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from longmoe.deepseek_gate import deepseek_v3_gate

ROUTED = ("router.weight", "router.bias", "experts.gate", "experts.up", "experts.down")


def swiglu(x: Tensor, gate: Tensor, up: Tensor, down: Tensor) -> Tensor:
    """down(silu(gate x) * up x); x (N, H), gate/up (I, H), down (H, I)."""
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def moe_forward(x: Tensor, params: dict[str, Tensor], *, top_k: int, n_group: int = 1, topk_group: int = 1,
                routed_scaling_factor: float = 1.0, norm_topk_prob: bool = True) -> Tensor:
    """x (..., H) -> (..., H): sum over the token's chosen experts of weight * expert(x), plus the
    shared experts' output. Each expert runs once, on the tokens routed to it."""
    missing = [name for name in ROUTED if name not in params]
    if missing:
        raise ValueError(f"moe_forward: params lack {missing}")
    flat = x.reshape(-1, x.shape[-1])  # (T, H)
    weights, indices = deepseek_v3_gate(flat, params["router.weight"], params["router.bias"], top_k=top_k,
                                        n_group=n_group, topk_group=topk_group,
                                        routed_scaling_factor=routed_scaling_factor, norm_topk_prob=norm_topk_prob)
    out = torch.zeros_like(flat)
    for e in indices.unique().tolist():
        token, slot = torch.where(indices == e)
        y = swiglu(flat[token], params["experts.gate"][e], params["experts.up"][e], params["experts.down"][e])
        out.index_add_(0, token, y * weights[token, slot, None].to(y.dtype))
    if "shared.gate" in params:
        out = out + swiglu(flat, params["shared.gate"], params["shared.up"], params["shared.down"])
    return out.reshape(x.shape)
