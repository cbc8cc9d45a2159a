"""AWQ (activation-aware weight quantization): protect the weights that meet large activations.

Scaling input channel j of w up by s_j before a group-wise int4 round-to-nearest (RTN), and x's
channel down by s_j, leaves the product unchanged and cuts the relative rounding error of the
salient columns (the scale is shared by the group, so a larger column is rounded relatively finer).
With m_j = mean |x_j| over calibration tokens, AWQ searches alpha on a grid:
    s = clamp(m^alpha, min=1e-4);  s = s / sqrt(max(s) * min(s))
    w_hat(alpha) = fake_quant(w * s) / s      (x / s is folded into the previous op)
    err(alpha)   = mean over (T, N) of (x @ w^T - x @ w_hat^T)^2
and keeps the alpha of least error (the first such on the grid). alpha = 0 gives s = 1: plain RTN.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from .intquant import IntQuantConfig, fake_quant

INT4_G128 = IntQuantConfig(bits=4, symmetric=False, granularity="group", group_size=128)


@dataclass(frozen=True)
class AwqResult:
    """alpha: the chosen grid point. scales: (K,) at that alpha. w_hat: (N, K) the fake-quantized
    weight in the original basis. errors: err(alpha) for every grid point, in grid order."""

    alpha: float
    scales: Tensor
    w_hat: Tensor
    errors: tuple[float, ...]


def awq_scales(x: Tensor, alpha: float) -> Tensor:
    """s (K,) from calibration activations x (..., K): m = mean |x| over all but the last dim,
    s = clamp(m ** alpha, min=1e-4), then s / sqrt(max(s) * min(s)); in x's dtype."""
    # BEGIN SOLUTION
    m = x.abs().reshape(-1, x.shape[-1]).mean(dim=0)
    s = m.pow(alpha).clamp(min=1e-4)
    return s / (s.max() * s.min()).sqrt()
    # END SOLUTION


def awq_fake_quant_weight(w: Tensor, s: Tensor, config: IntQuantConfig = INT4_G128) -> Tensor:
    """fake_quant(w * s) / s: w (N, K) quantized in the scaled basis, returned in the original one."""
    # BEGIN SOLUTION
    return fake_quant(w * s, config) / s
    # END SOLUTION


def output_error(x: Tensor, w: Tensor, w_hat: Tensor) -> float:
    """mean over all outputs of (x @ w^T - x @ w_hat^T)^2, a Python float."""
    # BEGIN SOLUTION
    return float(((x @ w.T - x @ w_hat.T) ** 2).mean())
    # END SOLUTION


def awq_search(
    x: Tensor, w: Tensor, config: IntQuantConfig = INT4_G128, grid: int = 20
) -> AwqResult:
    """Try alpha = i / grid for i = 0..grid (grid + 1 points, 0 and 1 included), keep the first
    alpha of least output error on the calibration x (T, K). ValueError if grid < 1."""
    # BEGIN SOLUTION
    if grid < 1:
        raise ValueError(f"grid must be >= 1, got {grid}")
    errors, best = [], None
    for i in range(grid + 1):
        alpha = i / grid
        s = awq_scales(x, alpha)
        w_hat = awq_fake_quant_weight(w, s, config)
        err = output_error(x, w, w_hat)
        errors.append(err)
        if best is None or err < best[0]:
            best = (err, alpha, s, w_hat)
    _, alpha, s, w_hat = best
    return AwqResult(alpha=alpha, scales=s, w_hat=w_hat, errors=tuple(errors))
    # END SOLUTION
