"""RMSNorm: LLaMA's normalisation (no mean subtraction, no bias)."""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Root-mean-square norm over the last dimension.

    y = x / sqrt(mean(x**2, dim=-1) + eps) * weight

    x: (..., d) in any float dtype; weight: (d,). The statistics are computed in float32 whatever
    x's dtype (bf16 squares lose too much); the normalised x is cast back to x.dtype *before*
    the multiplication by `weight`, as Hugging Face does, so results match it bit for bit in fp32.
    Returns (..., d).
    """
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


class RMSNorm(nn.Module):
    """`rms_norm` with a learned per-channel gain (HF key: `...layernorm.weight`)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)
