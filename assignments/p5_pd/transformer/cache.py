"""The KV cache: keys and values of past tokens, preallocated for every layer."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transformer.config import LlamaConfig


@dataclass
class KVCache:
    """Keys and values of every layer for a batch of B sequences that share slot indices.

    k, v: (L, B, Hkv, max_len, D). Slots [0, length) hold the keys (already rotated by RoPE) and
    values of the tokens seen so far; slot j of every row is the j-th token fed to the model
    (left padding included). A forward pass over T new tokens writes slots [length, length + T)
    in each layer through `update`, and the model calls `advance(T)` once, after the last layer.
    """

    k: Tensor
    v: Tensor
    length: int = 0

    @classmethod
    def allocate(
        cls, config: LlamaConfig, batch_size: int, max_len: int, *, dtype: torch.dtype, device: torch.device | str
    ) -> KVCache:
        """An empty cache with room for `max_len` tokens per sequence."""
        if batch_size < 1 or max_len < 1:
            raise ValueError(f"KVCache needs batch_size >= 1 and max_len >= 1, got {batch_size}, {max_len}")
        shape = (config.num_hidden_layers, batch_size, config.num_key_value_heads, max_len, config.head_dim)
        return cls(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    def update(self, layer: int, k_new: Tensor, v_new: Tensor) -> tuple[Tensor, Tensor]:
        """Store this layer's keys/values of the T new tokens, return all keys/values so far.

        k_new, v_new: (B, Hkv, T, D), written at slots [length, length + T) of layer `layer`.
        Returns (k, v), each (B, Hkv, length + T, D): slots [0, length + T) of that layer (views
        into the cache, no copy). Does not change `length`: see `advance`.
        """
        if self.length + k_new.shape[2] > self.max_len:
            raise ValueError(f"KVCache full: {self.length} + {k_new.shape[2]} tokens > max_len={self.max_len}")
        start, end = self.length, self.length + k_new.shape[2]
        self.k[layer, :, :, start:end] = k_new
        self.v[layer, :, :, start:end] = v_new
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, num_tokens: int) -> None:
        """Mark `num_tokens` more slots as filled (call once per forward pass, after every layer)."""
        if self.length + num_tokens > self.max_len:
            raise ValueError(f"KVCache full: {self.length} + {num_tokens} tokens > max_len={self.max_len}")
        self.length += num_tokens
