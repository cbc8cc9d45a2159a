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
        raise NotImplementedError("p3.20: QuantConfig.__post_init__")


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
    raise NotImplementedError("p3.21: qparams")


def quantize_codes(w: Tensor, scale: Tensor, zero: Tensor, bits: int) -> Tensor:
    """Codes clamp(round(w / scale) + zero, 0, 2^b - 1) in w's dtype (scale, zero broadcast)."""
    raise NotImplementedError("p3.22: quantize_codes")


def group_count(k: int, config: QuantConfig) -> int:
    """Number of groups G over k input columns (1 for per-channel)."""
    return 1 if config.group_size == -1 else math.ceil(k / config.group_size)


def rtn(w: Tensor, config: QuantConfig) -> QuantResult:
    """Round-to-nearest: each group of w (N, K) quantized on its own grid, in w's dtype."""
    n, k = w.shape
    g = k if config.group_size == -1 else config.group_size
    raise NotImplementedError("p3.23: rtn")
