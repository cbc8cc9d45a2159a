"""FP8 with scales: map each tensor (or block) so its largest magnitude lands on the format's max.

scale = amax / fmt.max_finite (float32), stored value = round(x / scale), x ~ value * scale.
Per-tensor uses one scale; per-block uses one scale per `block_size` consecutive elements of the
last dim (the 1 x 128 activation tiles of DeepSeek-V3), so one outlier only coarsens its block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .formats import FP8_E4M3, FloatFormat, from_bits, to_bits


@dataclass(frozen=True)
class ScaledTensor:
    """A quantized tensor.

    bits: int32 patterns of `fmt`, same shape as the input x: (..., n).
    scale: float32; shape () per-tensor, or (..., n // block_size) per-block.
    block_size: None for per-tensor, else the number of last-dim elements sharing a scale.
    """

    bits: Tensor
    scale: Tensor
    fmt: FloatFormat
    block_size: int | None = None


def _scale_from_amax(amax: Tensor, fmt: FloatFormat) -> Tensor:
    """float32 scale = amax / max_finite; an all-zero group gets scale 1 (not 0, which gives NaN)."""
    raise NotImplementedError("s00.19: _scale_from_amax")


def quantize_per_tensor(x: Tensor, fmt: FloatFormat = FP8_E4M3) -> ScaledTensor:
    """One scale for the whole tensor.

    amax = max |x| (float32); scale = amax / fmt.max_finite computed in float32 (1.0 if amax is 0);
    bits = to_bits(x / scale, fmt) with the division done in float32.
    ValueError if x is not float32 or holds a non-finite value.
    """
    raise NotImplementedError("s00.20: quantize_per_tensor")


def quantize_per_block(x: Tensor, block_size: int, fmt: FloatFormat = FP8_E4M3) -> ScaledTensor:
    """One scale per `block_size` consecutive elements of the last dim.

    x: (..., n) with n divisible by block_size >= 1 (else ValueError, also for a 0-dim x or a
    block_size below 1, never a ZeroDivisionError or IndexError). For block j of a row,
    amax_j = max |x[..., j*block_size:(j+1)*block_size]|, scale[..., j] = amax_j / fmt.max_finite
    in float32 (1.0 for an all-zero block), and those elements are stored as
    to_bits(x_elem / scale[..., j], fmt). ValueError as in quantize_per_tensor.
    """
    raise NotImplementedError("s00.21: quantize_per_block")


def dequantize(t: ScaledTensor) -> Tensor:
    """float32 approximation of the original tensor: from_bits(bits) * scale (broadcast per block)."""
    raise NotImplementedError("s00.22: dequantize")


def _check_input(x: Tensor) -> None:
    if x.dtype != torch.float32:
        raise ValueError(f"expected a float32 tensor, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("cannot choose a scale for a tensor holding inf or NaN")
