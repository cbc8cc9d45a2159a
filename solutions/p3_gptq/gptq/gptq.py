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
        # BEGIN SOLUTION
        x = x.reshape(-1, self.in_features).to(torch.float64)  # (b, K)
        b = x.shape[0]
        self.H *= self.nsamples / (self.nsamples + b)
        self.nsamples += b
        x = x * (2 / self.nsamples) ** 0.5
        self.H += x.T @ x
        # END SOLUTION

    def quantize(self, w: Tensor, config: QuantConfig) -> QuantResult:
        """GPTQ-quantize w (N, K) with the H accumulated so far; the result is in float64.

        Raises ValueError before any add_batch (no calibration inputs: H would be all zeros)."""
        if w.dim() != 2 or w.shape[1] != self.in_features:
            raise ValueError(f"w must be (N, {self.in_features}), got shape {tuple(w.shape)}")
        # BEGIN SOLUTION
        if self.nsamples == 0:
            raise ValueError("no calibration inputs: call add_batch first")
        w, h, perm = prepare(w.to(torch.float64).clone(), self.H.clone(), config)
        u = inverse_cholesky(h)
        codes, scales, zeros = quantize_columns(w, u, config)
        inv = torch.argsort(perm)
        g = w.shape[1] if config.group_size == -1 else config.group_size
        g_idx = (torch.arange(w.shape[1]) // g)[inv].to(torch.int32)  # group of original column k
        codes = codes[:, inv]
        weight = scales[g_idx.long()].T * (codes - zeros[g_idx.long()].T)
        return QuantResult(codes.to(torch.int32), scales, zeros.to(torch.int32), g_idx, weight)
        # END SOLUTION


def prepare(w: Tensor, h: Tensor, config: QuantConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Dead columns (H[k, k] == 0: an input that is always 0) get H[k, k] = 1 and W[:, k] = 0;
    under act-order the columns are permuted by descending diag(H); then H += damp * mean(diag H) I.
    Returns (w, h, perm), w and h in the permuted order, perm (K,) with w_out = w_in[:, perm]."""
    # BEGIN SOLUTION
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    k = h.shape[0]
    perm = torch.argsort(torch.diag(h), descending=True) if config.desc_act else torch.arange(k)
    w, h = w[:, perm], h[perm][:, perm]
    h += config.damp_percent * torch.mean(torch.diag(h)) * torch.eye(k, dtype=h.dtype)
    return w, h, perm
    # END SOLUTION


def inverse_cholesky(h: Tensor) -> Tensor:
    """U upper triangular with U^T U = H^-1, from the damped H (K, K).

    Raises ValueError when H is not positive definite (no NaNs ever come out): raise
    damp_percent, or calibrate on more (or more varied) inputs."""
    # BEGIN SOLUTION
    if not torch.isfinite(h).all():
        raise ValueError("the Hessian has non-finite entries: check the calibration inputs")
    lower, info = torch.linalg.cholesky_ex(h)
    if info.item() != 0:
        raise ValueError("the damped Hessian is not positive definite: raise damp_percent "
                         "or calibrate on more inputs")
    hinv = torch.cholesky_inverse(lower)
    upper, info = torch.linalg.cholesky_ex(hinv, upper=True)
    if info.item() != 0 or not torch.isfinite(upper).all():
        raise ValueError("H^-1 is not positive definite in float64: raise damp_percent")
    return upper
    # END SOLUTION


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
        # BEGIN SOLUTION
        err = quantize_block(w, u, i1, i2, codes, scales, zeros, config)  # (N, i2 - i1)
        w[:, i2:] -= err @ u[i1:i2, i2:]  # the lazy update of everything right of the block
        # END SOLUTION
    return codes, scales, zeros


def quantize_block(w: Tensor, u: Tensor, i1: int, i2: int, codes: Tensor, scales: Tensor, zeros: Tensor,
                   config: QuantConfig) -> Tensor:
    """Quantize columns i1..i2-1 of w in place, updating only the block's own later columns.
    Fills codes, and scales/zeros of each group starting here. Returns the scaled errors
    e_i = (w_i - q_i) / U[i, i] of the block (N, i2 - i1)."""
    # BEGIN SOLUTION
    err = torch.zeros(w.shape[0], i2 - i1, dtype=w.dtype)
    for i in range(i1, i2):
        g = config.group_size
        if g != -1 and i % g == 0:  # a group starts: its grid from its current (updated) columns
            scales[i // g], zeros[i // g] = qparams(w[:, i : i + g], config.bits, config.sym)
        j = 0 if g == -1 else i // g
        codes[:, i] = quantize_codes(w[:, i], scales[j], zeros[j], config.bits)
        q = scales[j] * (codes[:, i] - zeros[j])
        e = (w[:, i] - q) / u[i, i]
        w[:, i:i2] -= e[:, None] * u[i, i:i2][None, :]
        err[:, i - i1] = e
    return err
    # END SOLUTION
