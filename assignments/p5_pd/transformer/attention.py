"""Causal grouped-query attention (GQA) with a KV cache."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from transformer.cache import KVCache
from transformer.config import LlamaConfig
from transformer.rope import apply_rope


def causal_mask(
    num_queries: int, num_keys: int, key_padding_mask: Tensor | None = None, device: torch.device | None = None
) -> Tensor:
    """Which keys each query may attend to.

    The T = num_queries queries are the *last* T of the S = num_keys slots (the earlier S - T
    slots come from the KV cache): query i sits at slot S - T + i and may see key j iff
    j <= S - T + i. With `key_padding_mask` (B, S; 1 = real token, 0 = padding) padding keys
    are hidden as well. Returns bool (B, 1, T, S), or (1, 1, T, S) without a padding mask;
    True = may attend.
    """
    q_slots = torch.arange(num_keys - num_queries, num_keys, device=device)[:, None]  # (T, 1)
    k_slots = torch.arange(num_keys, device=device)[None, :]  # (1, S)
    allowed = (k_slots <= q_slots)[None, None]  # (1, 1, T, S)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask.bool()[:, None, None, :]
    return allowed


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Scaled dot-product attention where groups of query heads share a key/value head.

    q: (B, H, T, D); k, v: (B, Hkv, S, D) with H a multiple of Hkv: query head h reads key/value
    head h // (H // Hkv) (HF's `repeat_kv`). mask: bool, broadcastable to (B, H, T, S),
    True = may attend; None = every query sees every key.
        out = softmax(q k^T / sqrt(D) with masked scores removed) v
    The softmax runs in float32 and must stay finite for huge scores. A query whose keys are all
    masked must not produce NaN or inf (its output is otherwise unspecified): left padding
    creates such rows. Returns (B, H, T, D) in q.dtype.
    """
    n_rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(n_rep, dim=1)  # (B, H, S, D): kv head g serves query heads g*n_rep ...
    v = v.repeat_interleave(n_rep, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-1, -2)).float() * scale  # (B, H, T, S)
    if mask is not None:
        # The most negative finite float, not -inf: a fully masked row stays finite (uniform).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1)
    return (probs.to(v.dtype) @ v).to(q.dtype)


class Attention(nn.Module):
    """The attention block of one decoder layer (HF keys: `self_attn.{q,k,v,o}_proj.weight`)."""

    def __init__(self, config: LlamaConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        d, hd = config.hidden_size, config.head_dim
        self.q_proj = nn.Linear(d, self.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.num_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, self.num_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.num_heads * hd, d, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, cache: KVCache | None) -> Tensor:
        """x: (B, T, hidden) normalised hidden states of the T new tokens; cos, sin: (B, T, D) from
        `rope_cos_sin`; mask: bool (B or 1, 1, T, S) from `causal_mask` with S = past + T;
        cache: this model's KVCache (the layer uses slot `self.layer_idx`) or None (no past).

        Project to q (H heads), k and v (Hkv heads), rotate q and k with RoPE, append k and v to
        the cache, attend, and project back with o_proj. Returns (B, T, hidden).
        """
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.v_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)  # (B, Hkv, past + T, D)
        out = attention(q, k, v, mask)  # (B, H, T, D)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))
