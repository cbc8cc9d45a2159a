"""DP attention + EP MoE (DeepSeek-V3's serving layout): attention is data-parallel, each rank runs
it for its own requests only (its own KV, no attention traffic); the MoE layer is expert-parallel
over the same ranks, so every rank's tokens meet in dispatch and combine. A rank with no requests
still joins every all-to-all: its peers' collectives would wait for it forever otherwise.

One pre-norm decoder block, per request x (T_i, H):
    h   = x + attention(rms_norm(x))            causal multi-head attention within the request
    out = h + ep_moe(rms_norm(h))               the MoE sees all of this rank's tokens at once
params: "attn.q", "attn.k", "attn.v", "attn.o" (H, H) (y = x W^T), "norm.attn", "norm.moe" (H,),
plus ep_moe_forward's params.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from epmoe.config import MoEConfig
from epmoe.ep_layer import ep_moe_forward
from epmoe.placement import ExpertPlacement


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x (..., H) / sqrt(mean(x^2) + eps) * weight, in fp32."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def request_attention(x: Tensor, params: dict[str, Tensor], num_heads: int) -> Tensor:
    """Causal multi-head self-attention of one request, x (T, H) -> (T, H) (no position encoding)."""
    raise NotImplementedError("p4.4: request_attention")


def dp_block_forward(requests: list[Tensor], params: dict[str, Tensor], placement: ExpertPlacement,
                     cfg: MoEConfig) -> list[Tensor]:
    """This DP rank's requests (a list, possibly empty, of (T_i, H)) through one block -> the same
    shapes. Attention per request on this rank; one EP MoE call over all of its tokens."""
    raise NotImplementedError("p4.5: dp_block_forward")
