"""An int8 KV cache (KV 缓存量化) with one scale per token per head.

K and V of shape (B, H, T, D) are stored as int8 codes q = round(x / scale) in [-127, 127] with
scale = max_d |x[b, h, t, :]| / 127 (float32, shape (B, H, T, 1); 1 for an all-zero vector).
A new token's scale depends on that token only, so appending never requantizes the past, and
one outlier token does not coarsen the others. Memory: D + 4 bytes per token per head instead of
2 D in bf16 (D = 128: 132 vs 256 bytes, 0.52x).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

QMAX = 127


def quantize_kv(x: Tensor) -> tuple[Tensor, Tensor]:
    """x (..., D) float32 -> (q int8 (..., D), scale float32 (..., 1)); q = clamp(round(x / scale),
    -127, 127) with torch.round (half to even) and scale = amax over D / 127 (1 if amax is 0)."""
    raise NotImplementedError("s08.18: quantize_kv")


def dequantize_kv(q: Tensor, scale: Tensor) -> Tensor:
    """float32 q * scale, the shape of q."""
    raise NotImplementedError("s08.19: dequantize_kv")


class Int8KVCache:
    """One layer's K and V for `batch` sequences of up to `max_len` tokens, quantized on append.

    k_q, v_q: int8 (batch, heads, max_len, head_dim); k_scale, v_scale: float32
    (batch, heads, max_len, 1); length: the tokens stored so far (the same for every sequence).
    """

    def __init__(self, batch: int, heads: int, max_len: int, head_dim: int) -> None:
        if min(batch, heads, max_len, head_dim) < 1:
            raise ValueError("batch, heads, max_len and head_dim must all be >= 1")
        self.k_q = torch.zeros(batch, heads, max_len, head_dim, dtype=torch.int8)
        self.v_q = torch.zeros_like(self.k_q)
        self.k_scale = torch.ones(batch, heads, max_len, 1)
        self.v_scale = torch.ones_like(self.k_scale)
        self.length = 0

    def append(self, k: Tensor, v: Tensor) -> None:
        """Quantize k, v (batch, heads, t, head_dim) float32 and store them at positions
        length .. length + t - 1. ValueError if a shape disagrees or the cache would overflow."""
        raise NotImplementedError("s08.20: Int8KVCache.append")

    def keys_values(self) -> tuple[Tensor, Tensor]:
        """The stored K and V dequantized: float32 (batch, heads, length, head_dim) each."""
        raise NotImplementedError("s08.21: Int8KVCache.keys_values")


def quantized_attention(q: Tensor, cache: Int8KVCache, causal: bool = True) -> Tensor:
    """softmax(q K^T / sqrt(D)) V over the cache's dequantized K, V: float32 (B, Hq, Tq, D).

    q: (B, Hq, Tq, D) float32, the queries of the last Tq positions of the cache (decode: Tq = 1);
    Hq a multiple of the cache's heads (grouped-query attention: query head h reads kv head
    h // (Hq / Hkv)). causal: query i (position length - Tq + i) sees keys 0 .. length - Tq + i;
    otherwise every stored key. Write the attention yourself (SDPA is the tests' oracle).
    """
    raise NotImplementedError("s08.22: quantized_attention")
