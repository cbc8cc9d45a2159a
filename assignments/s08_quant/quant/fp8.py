"""FP8 e4m3fn with scales, the tile way (DeepSeek-V3's recipe on Hopper).

Every scale covers one tile of a 2-D tensor (M, K): tile (tm, tk) gives a scale grid of shape
(ceil(M / tm), ceil(K / tk)), edge tiles being smaller. The common recipes are tile choices:
  per-tensor  (M, K)       one scale
  per-token   (1, K)       one scale per row (an activation's token, a weight's output channel)
  activation  (1, 128)     1 x 128 tiles along K (DeepSeek-V3's activations)
  weight      (128, 128)   128 x 128 blocks (DeepSeek-V3's weights)
scale = amax(tile) / 448 in float32 (1 for an all-zero tile); data = fp8(x / scale) with x / scale
clamped to +-448 first (saturating, so every torch version agrees); x ~ float(data) * scale.
The element rounding is torch's cast (s00 built it bit by bit); the exercise is the scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

E4M3_MAX = 448.0
FP8 = torch.float8_e4m3fn


@dataclass(frozen=True)
class Fp8Tensor:
    """data: float8_e4m3fn (M, K). scale: float32 (ceil(M / tm), ceil(K / tk)). tile: (tm, tk)."""

    data: Tensor
    scale: Tensor
    tile: tuple[int, int]


def fp8_scale(amax: Tensor) -> Tensor:
    """float32 scale = amax / 448, elementwise; 1 where amax is 0 (an all-zero tile, not 0 / 0)."""
    raise NotImplementedError("s08.4: fp8_scale")


def tile_amax(x: Tensor, tile: tuple[int, int]) -> Tensor:
    """max |x| over each (tm, tk) tile of x (M, K): shape (ceil(M / tm), ceil(K / tk)), x's dtype.

    Edge tiles hold what is left (M % tm rows, K % tk columns); nothing outside x counts.
    """
    raise NotImplementedError("s08.5: tile_amax")


def expand_tiles(scale: Tensor, tile: tuple[int, int], shape: tuple[int, int]) -> Tensor:
    """The (gm, gk) scale grid broadcast to every element of the (M, K) tensor it scales."""
    raise NotImplementedError("s08.6: expand_tiles")


def quantize_fp8(x: Tensor, tile: tuple[int, int]) -> Fp8Tensor:
    """x (M, K) float32 -> Fp8Tensor with one scale per tile (module doc).

    data = (x / scale).clamp(-448, 448).to(float8_e4m3fn), the division in float32.
    ValueError: x not 2-D float32, a non-finite value, or a tile side < 1.
    """
    raise NotImplementedError("s08.7: quantize_fp8")


def dequantize_fp8(t: Fp8Tensor) -> Tensor:
    """float32 (M, K): float(data) * scale of each element's tile."""
    raise NotImplementedError("s08.8: dequantize_fp8")


def per_tensor(x: Tensor) -> Fp8Tensor:
    """One scale for the whole (M, K) tensor."""
    return quantize_fp8(x, (x.shape[0], x.shape[1]))


def per_token(x: Tensor) -> Fp8Tensor:
    """One scale per row."""
    return quantize_fp8(x, (1, x.shape[1]))


def per_block_activation(x: Tensor, block: int = 128) -> Fp8Tensor:
    """One scale per 1 x block tile: DeepSeek-V3's activation (and gradient) quantization."""
    return quantize_fp8(x, (1, block))


def per_block_weight(w: Tensor, block: int = 128) -> Fp8Tensor:
    """One scale per block x block tile of a weight (N, K)."""
    return quantize_fp8(w, (block, block))


def fp8_linear(x: Fp8Tensor, w: Fp8Tensor) -> Tensor:
    """y = x @ w^T, float32 (M, N), from Fp8Tensors x (M, K) and w (N, K), the way DeepSeek-V3's
    FP8 GEMM scales it on Hopper (DeepGEMM): the tensor cores sum a K chunk's fp8 products, the
    CUDA cores scale that partial sum and accumulate it in float32.

    K is cut into chunks of kc = min(x.tile[1], w.tile[1]) columns (the last chunk holds what is
    left); each chunk's product of the raw fp8 values (as float32) is multiplied by x's scale for
    (row, chunk) and w's scale for (column, chunk), then accumulated in float32.
    ValueError if x's and w's K differ, or if a K tile is neither a multiple of kc nor at least K
    (a chunk would straddle two scales).
    """
    raise NotImplementedError("s08.9: fp8_linear")
