"""Integer quantization (整数量化): x ~ (q - zero) * scale with q an integer code of `bits` bits.

Symmetric: codes in [-(2^(b-1) - 1), 2^(b-1) - 1] (the code -2^(b-1) is never used, so the grid is
symmetric about 0), zero = 0, scale = amax / qmax.
Asymmetric: codes in [0, 2^b - 1], the range [min(x, 0), max(x, 0)] mapped onto it, with an integer
zero point so that 0.0 is exactly representable (padding, ReLU zeros).

Granularity of the scales for x of shape (..., K), K the input (reduction) dim of a weight (N, K):
  "tensor"  one scale, shape (1,) * x.dim()
  "channel" one scale per row (per output channel of a weight, per token of an activation): (..., 1)
  "group"   one scale per `group_size` consecutive elements of a row: (..., ceil(K / group_size));
            when K is not a multiple of group_size the last group is shorter (K % group_size wide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

Granularity = Literal["tensor", "channel", "group"]


@dataclass(frozen=True)
class IntQuantConfig:
    """How to quantize. bits in 2..8; group_size is given iff granularity == "group"."""

    bits: int = 8
    symmetric: bool = True
    granularity: Granularity = "channel"
    group_size: int | None = None

    def __post_init__(self) -> None:
        if not 2 <= self.bits <= 8:
            raise ValueError(f"bits must be in 2..8, got {self.bits}")
        if self.granularity not in ("tensor", "channel", "group"):
            raise ValueError(f"granularity must be 'tensor', 'channel' or 'group', got {self.granularity!r}")
        if (self.granularity == "group") != (self.group_size is not None):
            raise ValueError("group_size is required for granularity 'group' and only for it")
        if self.group_size is not None and self.group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size}")


@dataclass(frozen=True)
class IntQuantized:
    """A quantized tensor.

    q: int32 codes, the shape of x.  scale: x's float dtype, the granularity's shape (module doc).
    zero: int32, the shape of scale (all 0 when symmetric).
    """

    q: Tensor
    scale: Tensor
    zero: Tensor
    config: IntQuantConfig


def qrange(bits: int, symmetric: bool) -> tuple[int, int]:
    """(qmin, qmax): (-(2^(b-1) - 1), 2^(b-1) - 1) symmetric, (0, 2^b - 1) asymmetric."""
    raise NotImplementedError("s08.10: qrange")


def _groups(x: Tensor, config: IntQuantConfig) -> Tensor:
    """x (..., K) viewed as (..., G, width): the elements that share one scale along the last dim.

    tensor: all elements in one group (leading dims flattened too); channel: G = 1, width = K;
    group: G = ceil(K / g), the last group padded with zeros (zeros never widen the range: the
    range always contains 0).
    """
    raise NotImplementedError("s08.11: _groups")


def compute_qparams(x: Tensor, config: IntQuantConfig) -> tuple[Tensor, Tensor]:
    """(scale, zero) of x (..., K), float32 or float64, at the config's granularity (module doc).

    Per group, with lo = min(min x, 0) and hi = max(max x, 0):
      symmetric:  scale = max(|lo|, hi) / qmax, zero = 0
      asymmetric: scale = (hi - lo) / qmax,     zero = round(-lo / scale) (an integer in [0, qmax])
    computed in x's dtype; a group whose range is 0 (all zeros) gets scale = 1, zero = 0.
    scale has x's dtype, zero is int32. ValueError if x has fewer than 1 dim or is not float32/64.
    """
    raise NotImplementedError("s08.12: compute_qparams")


def expand_params(p: Tensor, shape: torch.Size | tuple[int, ...], config: IntQuantConfig) -> Tensor:
    """A scale or zero point broadcast to the full `shape` (..., K) of the tensor it belongs to."""
    raise NotImplementedError("s08.13: expand_params")


def quantize_codes(x: Tensor, scale: Tensor, zero: Tensor, config: IntQuantConfig) -> Tensor:
    """int32 codes q = clamp(round(x / scale) + zero, qmin, qmax) for given (scale, zero).

    round is torch.round (half to even); x / scale is a division in x's dtype (not a multiply by
    1 / scale). Values outside the grid saturate at qmin / qmax.
    """
    raise NotImplementedError("s08.14: quantize_codes")


def quantize(x: Tensor, config: IntQuantConfig) -> IntQuantized:
    """Scales from x itself (compute_qparams), then its codes (quantize_codes)."""
    raise NotImplementedError("s08.15: quantize")


def dequantize(t: IntQuantized) -> Tensor:
    """(q - zero) * scale in scale's dtype, the shape of q."""
    raise NotImplementedError("s08.16: dequantize")


def fake_quant(x: Tensor, config: IntQuantConfig) -> Tensor:
    """dequantize(quantize(x)): x rounded to its quantization grid, in x's dtype and shape."""
    raise NotImplementedError("s08.17: fake_quant")
