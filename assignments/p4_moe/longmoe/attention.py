"""Attention over one block of keys, returning the log-sum-exp that lets blocks be merged, and the
merge itself. Ring attention (ring.py) is this, applied to one key/value block per ring step.

Masks are decided by global token positions, so the same code serves a contiguous chunk, a zigzag
shard or the whole sequence: query at position i sees key at position j when
    causal:           j <= i
    sliding window w: i - w < j   (w keys: the query's own and the w - 1 before it; causal only)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def visible(q_pos: Tensor, k_pos: Tensor, causal: bool, window: int | None) -> Tensor:
    """Boolean mask (Tq, Tk): True where query q_pos[a] may attend key k_pos[b]."""
    if window is not None and (not causal or window < 1):
        raise ValueError(f"window {window}: a sliding window needs causal=True and at least one key")
    diff = q_pos[:, None] - k_pos[None, :]  # (Tq, Tk): how far back each key lies
    mask = torch.ones_like(diff, dtype=torch.bool)
    if causal:
        mask &= diff >= 0
    if window is not None:
        mask &= diff < window
    return mask


def block_attention(q: Tensor, k: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, *, causal: bool,
                    window: int | None = None, scale: float | None = None) -> tuple[Tensor, Tensor]:
    """Softmax attention of q over one block of keys. q: (B, H, Tq, D), k and v: (B, H, Tk, D),
    positions (Tq,) and (Tk,). Returns (out (B, H, Tq, D), lse (B, H, Tq) in fp32), where
    lse = log sum_j exp(score_j) over the visible keys. A query that sees no key of this block
    gets out = 0 and lse = -inf (so that a merge gives it weight 0). scale defaults to 1/sqrt(D)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale  # (B, H, Tq, Tk)
    scores = scores.masked_fill(~visible(q_pos, k_pos, causal, window), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # (B, H, Tq); -inf where no key is visible
    safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)
    probs = torch.exp(scores - safe[..., None])  # exp(-inf) = 0 on masked keys
    return (probs @ v.float()).to(q.dtype), lse


def merge_attention(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    """Attention over the union of two disjoint key blocks from each block's (out, lse):
        lse = log(exp(lse_a) + exp(lse_b)),  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b,
    computed with the maximum subtracted first (no overflow); rows where both are -inf stay
    (0, -inf). Shapes: out (B, H, T, D), lse (B, H, T)."""
    top = torch.maximum(lse_a, lse_b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)  # both blocks empty: avoid -inf - -inf
    wa, wb = torch.exp(lse_a - top), torch.exp(lse_b - top)
    total = wa + wb
    lse = top + torch.log(total)
    denom = torch.where(total > 0, total, torch.ones_like(total))[..., None]
    out = (wa[..., None] * out_a.float() + wb[..., None] * out_b.float()) / denom
    return out.to(out_a.dtype), lse
