"""Round-to-nearest quantization on GPTQ's integer grid, and the config shared with gptq.py.

Grid (the convention of GPTQ's reference code, which AutoGPTQ and vLLM checkpoints follow):
    codes in [0, 2^b - 1];  W ~= scale * (code - zero)
    symmetric:  scale = 2 * amax / (2^b - 1),  zero = 2^(b-1)          (the grid's middle)
    asymmetric: scale = (hi - lo) / (2^b - 1), zero = round(-lo / scale),  lo <= 0 <= hi
One (scale, zero) per output row and group of `group_size` consecutive input columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class QuantConfig:
    """bits: 2..16; group_size: input columns per group, or -1 for one group per row (per-channel);
    sym: symmetric grid; desc_act: act-order (columns by descending Hessian diagonal);
    damp_percent: damping added to H's diagonal, a fraction of its mean; block_size: GPTQ's lazy batch."""

    bits: int = 4
    group_size: int = 128
    sym: bool = True
    desc_act: bool = False
    damp_percent: float = 0.01
    block_size: int = 128

    def __post_init__(self) -> None:
        # BEGIN SOLUTION
        if not isinstance(self.bits, int) or not 2 <= self.bits <= 16:
            raise ValueError(f"bits must be an int in [2, 16], got {self.bits!r}")
        if not isinstance(self.block_size, int) or self.block_size < 1:
            raise ValueError(f"block_size must be a positive int, got {self.block_size!r}")
        g = self.group_size
        if not isinstance(g, int) or (g != -1 and g < 1):
            raise ValueError(f"group_size must be -1 (per-channel) or a positive int, got {g!r}")
        if g > 0 and self.block_size % g and g % self.block_size:
            # A group that starts inside a block and ends past it would see stale columns.
            raise ValueError(f"group_size {g} must divide block_size {self.block_size} or be a multiple of it")
        if not isinstance(self.damp_percent, (int, float)) or not 0 <= self.damp_percent < 1 \
                or math.isnan(self.damp_percent):
            raise ValueError(f"damp_percent must be in [0, 1), got {self.damp_percent!r}")
        # END SOLUTION


@dataclass(frozen=True)
class QuantResult:
    """A quantized linear weight W (N out, K in).

    codes (N, K) int32 in [0, 2^b); scales (G, N) and zeros (G, N) int32 of each group;
    g_idx (K,) int32, the group of each input column; weight (N, K): scales[g_idx[k], n] *
    (codes[n, k] - zeros[g_idx[k], n]), in the dtype the quantizer computed in."""

    codes: Tensor
    scales: Tensor
    zeros: Tensor
    g_idx: Tensor
    weight: Tensor


def qparams(w: Tensor, bits: int, sym: bool) -> tuple[Tensor, Tensor]:
    """Scale and zero of each row of w (rows, cols) over its columns: two (rows,) tensors, the
    zero rounded (an integer value) in w's dtype. The range always includes 0; an all-zero row
    gets the range [-1, 1], as GPTQ's reference does, so its scale is never 0."""
    # BEGIN SOLUTION
    qmax = 2**bits - 1
    zero_t = torch.zeros((), dtype=w.dtype)
    lo, hi = torch.minimum(w.min(dim=1).values, zero_t), torch.maximum(w.max(dim=1).values, zero_t)
    if sym:
        amax = torch.maximum(-lo, hi)
        amax = torch.where(amax == 0, torch.ones_like(amax), amax)
        return 2 * amax / qmax, torch.full_like(amax, (qmax + 1) / 2)
    empty = (lo == 0) & (hi == 0)
    lo, hi = torch.where(empty, -1.0, lo), torch.where(empty, 1.0, hi)
    scale = (hi - lo) / qmax
    return scale, torch.round(-lo / scale)
    # END SOLUTION


def quantize_codes(w: Tensor, scale: Tensor, zero: Tensor, bits: int) -> Tensor:
    """Codes clamp(round(w / scale) + zero, 0, 2^b - 1) in w's dtype (scale, zero broadcast)."""
    # BEGIN SOLUTION
    return torch.clamp(torch.round(w / scale) + zero, 0, 2**bits - 1)
    # END SOLUTION


def group_count(k: int, config: QuantConfig) -> int:
    """Number of groups G over k input columns (1 for per-channel)."""
    return 1 if config.group_size == -1 else math.ceil(k / config.group_size)


def rtn(w: Tensor, config: QuantConfig) -> QuantResult:
    """Round-to-nearest: each group of w (N, K) quantized on its own grid, in w's dtype."""
    n, k = w.shape
    g = k if config.group_size == -1 else config.group_size
    # BEGIN SOLUTION
    codes, weight = torch.empty_like(w), torch.empty_like(w)
    scales = torch.empty(group_count(k, config), n, dtype=w.dtype)
    zeros = torch.empty_like(scales)
    for j, c in enumerate(range(0, k, g)):
        block = w[:, c : c + g]
        scales[j], zeros[j] = qparams(block, config.bits, config.sym)
        codes[:, c : c + g] = quantize_codes(block, scales[j, :, None], zeros[j, :, None], config.bits)
        weight[:, c : c + g] = scales[j, :, None] * (codes[:, c : c + g] - zeros[j, :, None])
    g_idx = torch.arange(k, dtype=torch.int32) // g
    return QuantResult(codes.to(torch.int32), scales, zeros.to(torch.int32), g_idx, weight)
    # END SOLUTION
