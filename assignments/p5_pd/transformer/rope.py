"""Rotary position embeddings (RoPE) in Hugging Face's rotate-half layout, and position ids."""

from __future__ import annotations

import torch
from torch import Tensor


def rope_cos_sin(position_ids: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """Cosines and sines of the rotation angles of every position.

    position_ids: (B, T) integer positions. For pair index i in [0, head_dim/2) the frequency is
    inv_freq[i] = theta ** (-2i / head_dim) and the angle is position * inv_freq[i], computed in
    float32 (compute inv_freq as 1 / theta ** (arange(0, head_dim, 2) / head_dim) to match HF).
    The last dimension is laid out as [angles, angles] (the i-th and (i + head_dim/2)-th entries
    hold the same angle), which is what `apply_rope`'s rotate-half pairing needs.
    Returns (cos, sin), each float32 of shape (B, T, head_dim).
    """
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=position_ids.device) / head_dim
    inv_freq = 1.0 / (theta**exponents)  # (D/2,)
    angles = position_ids[..., None].float() * inv_freq  # (B, T, D/2)
    angles = torch.cat((angles, angles), dim=-1)  # (B, T, D)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate queries or keys by their positions' angles.

    x: (B, H, T, D); cos, sin: (B, T, D) from `rope_cos_sin` (broadcast over the H heads).
    Dimension i is paired with dimension i + D/2 ("rotate half", HF's convention; *not* the
    interleaved pairs (2i, 2i+1) of the RoFormer paper):
        out = x * cos + rotate_half(x) * sin,   rotate_half([x1, x2]) = [-x2, x1]
    cos and sin are cast to x.dtype first (as HF does). Returns a tensor shaped and typed like x.
    """
    cos, sin = cos[:, None].to(x.dtype), sin[:, None].to(x.dtype)  # (B, 1, T, D)
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * cos + rotated * sin


def position_ids_for(
    num_new: int, past: int, attention_mask: Tensor | None, batch_size: int, device: torch.device
) -> Tensor:
    """RoPE positions of the `num_new` tokens that follow `past` slots already in the KV cache.

    Without a mask every row counts from 0: positions are past, past + 1, ..., past + num_new - 1.
    With a left-padding `attention_mask` (B, past + num_new; 1 = real token, 0 = padding) a
    token's position is the number of real tokens before it, i.e. cumsum(mask) - 1 over the
    whole row, read at the last num_new slots and clamped at 0 (padding slots get 0). This is
    what HF's `generate` does, so a left-padded prompt gets the same positions as alone.
    Returns int64 (B, num_new).
    """
    if attention_mask is None:
        positions = torch.arange(past, past + num_new, device=device)
        return positions[None].expand(batch_size, num_new)
    positions = attention_mask.long().cumsum(dim=-1) - 1  # (B, past + num_new)
    return positions[:, -num_new:].clamp(min=0)
