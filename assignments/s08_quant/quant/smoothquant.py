"""SmoothQuant (平滑量化): move activation outliers into the weights, then quantize both to int8.

A linear y = x @ w^T with x (T, K) and w (N, K) is unchanged by any per-input-channel s (K,):
y = (x / s) @ (w * s)^T. Activations of LLMs have a few channels with huge magnitudes (离群通道),
which ruin a per-tensor int8 scale; weights are flat. SmoothQuant picks
    s_j = max|x_j|^alpha / max|w_j|^(1 - alpha)
to split the range between the two (alpha = 0.5: both get sqrt of the product of the maxima).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .intquant import IntQuantConfig, fake_quant

W8A8_PER_TENSOR = IntQuantConfig(bits=8, symmetric=True, granularity="tensor")


def channel_absmax(t: Tensor) -> Tensor:
    """max |t| over every dim but the last: (K,) for t (..., K)."""
    raise NotImplementedError("s08.23: channel_absmax")


def smooth_scales(x: Tensor, w: Tensor, alpha: float = 0.5) -> Tensor:
    """s (K,) = channel_absmax(x)^alpha / channel_absmax(w)^(1 - alpha), in x's dtype.

    x: calibration activations (..., K); w: weight (N, K). A channel whose activation or weight
    maximum is 0 gets s = 1 (nothing to balance, and no 0 / 0). ValueError if alpha is outside
    [0, 1] or the K sizes differ.
    """
    raise NotImplementedError("s08.24: smooth_scales")


def apply_smoothing(x: Tensor, w: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
    """(x / s, w * s): s (K,) divides x's channels (..., K) and multiplies w's input columns (N, K).

    In a deployed model x / s is folded into the preceding RMSNorm's gain, so it costs nothing.
    """
    raise NotImplementedError("s08.25: apply_smoothing")


def w8a8_linear(x: Tensor, w: Tensor) -> Tensor:
    """Fake-quantized int8 linear: fake_quant(x) @ fake_quant(w)^T, both symmetric int8 per
    tensor (W8A8_PER_TENSOR), computed in x's dtype. x (..., K), w (N, K) -> (..., N)."""
    raise NotImplementedError("s08.26: w8a8_linear")
