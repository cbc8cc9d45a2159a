"""GPTQ (Frantar et al., 2022): quantize W column by column, each rounding error compensated on
the columns not yet quantized through the inverse Hessian of the layer's reconstruction loss.

    loss(Q) = || X W^T - X Q^T ||^2 / n,   H = 2 X^T X / n  (K, K), one H for all N rows
Column i quantized with error e_i = (w_i - q_i) / Hinv[i, i]; the later columns j > i move by
-e_i * Hinv[i, j]. With U the upper Cholesky factor of H^-1, row i of U holds exactly those
Hinv entries after columns 0..i-1 were eliminated, so one factorization replaces every
Schur-complement update. Lazy batches: inside a block of B columns the updates touch only the
block; the rest of W gets them all at once, one (N, B) x (B, K - i2) product per block.
Everything is computed in float64.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .quantizer import QuantConfig, QuantResult, group_count, qparams, quantize_codes


class GPTQ:
    """Hessian accumulator and quantizer for one linear layer with `in_features` = K inputs."""

    def __init__(self, in_features: int) -> None:
        if not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive int, got {in_features!r}")
        self.in_features = in_features
        self.H = torch.zeros(in_features, in_features, dtype=torch.float64)  # (K, K)
        self.nsamples = 0

    def add_batch(self, x: Tensor) -> None:
        """Fold the inputs x (..., K) into H = 2 X^T X / n as a running average over all rows seen."""
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x must end in K = {self.in_features}, got shape {tuple(x.shape)}")
        raise NotImplementedError("p3.4: GPTQ.add_batch")

    def quantize(self, w: Tensor, config: QuantConfig) -> QuantResult:
        """GPTQ-quantize w (N, K) with the H accumulated so far; the result is in float64.

        Raises ValueError before any add_batch (no calibration inputs: H would be all zeros)."""
        if w.dim() != 2 or w.shape[1] != self.in_features:
            raise ValueError(f"w must be (N, {self.in_features}), got shape {tuple(w.shape)}")
        raise NotImplementedError("p3.5: GPTQ.quantize")


def prepare(w: Tensor, h: Tensor, config: QuantConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Dead columns (H[k, k] == 0: an input that is always 0) get H[k, k] = 1 and W[:, k] = 0;
    under act-order the columns are permuted by descending diag(H); then H += damp * mean(diag H) I.
    Returns (w, h, perm), w and h in the permuted order, perm (K,) with w_out = w_in[:, perm]."""
    raise NotImplementedError("p3.6: prepare")


def inverse_cholesky(h: Tensor) -> Tensor:
    """U upper triangular with U^T U = H^-1, from the damped H (K, K).

    Raises ValueError when H is not positive definite (no NaNs ever come out): raise
    damp_percent, or calibrate on more (or more varied) inputs."""
    raise NotImplementedError("p3.7: inverse_cholesky")


def quantize_columns(w: Tensor, u: Tensor, config: QuantConfig) -> tuple[Tensor, Tensor, Tensor]:
    """The GPTQ loop over w (N, K) in blocks of config.block_size columns, u from inverse_cholesky.
    Returns codes (N, K) in the same (permuted) column order, scales and zeros (G, N); group j
    holds permuted columns [j*g, (j+1)*g), its grid taken when its first column comes up."""
    n, k = w.shape
    scales = torch.empty(group_count(k, config), n, dtype=w.dtype)
    zeros = torch.empty_like(scales)
    if config.group_size == -1:
        scales[0], zeros[0] = qparams(w, config.bits, config.sym)
    codes = torch.empty_like(w)
    for i1 in range(0, k, config.block_size):
        i2 = min(i1 + config.block_size, k)
        raise NotImplementedError("p3.8: quantize_columns")
    return codes, scales, zeros


def quantize_block(w: Tensor, u: Tensor, i1: int, i2: int, codes: Tensor, scales: Tensor, zeros: Tensor,
                   config: QuantConfig) -> Tensor:
    """Quantize columns i1..i2-1 of w in place, updating only the block's own later columns.
    Fills codes, and scales/zeros of each group starting here. Returns the scaled errors
    e_i = (w_i - q_i) / U[i, i] of the block (N, i2 - i1)."""
    raise NotImplementedError("p3.9: quantize_block")
