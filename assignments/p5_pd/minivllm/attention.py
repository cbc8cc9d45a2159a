"""Attention over the paged KV cache.

A step's batch is "varlen": the new tokens of all B sequences are concatenated into T rows.
Sequence b owns rows [query_start_loc[b], query_start_loc[b + 1]); after this step's write it has
context_lens[b] tokens in the cache, so its new tokens sit at positions
context_lens[b] - query_len_b, ..., context_lens[b] - 1 and attend causally to cache positions
0..their own. Cache position p of sequence b lives in physical block block_tables[b, p // block_size],
at offset p % block_size; the flat slot is block * block_size + offset.

Cache layout per layer: k_cache, v_cache of shape (num_blocks, block_size, num_kv_heads, head_dim).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class AttentionMetadata:
    """Where a step's tokens go in the cache and what each sequence attends to.

    slot_mapping: (T,) int64, flat cache slot of every new token.
    query_start_loc: (B + 1,) int32, row offsets of each sequence's new tokens (starts at 0).
    context_lens: (B,) int32, tokens in the cache for each sequence once this step's K/V are written.
    block_tables: (B, max_blocks) int32, each sequence's block table padded with 0 on the right.
    query_lens_cpu / context_lens_cpu: the same lengths as Python lists (no device sync to read them).
    num_decodes: how many leading sequences have exactly one new token (they may take a decode kernel).
    """

    slot_mapping: Tensor
    query_start_loc: Tensor
    context_lens: Tensor
    block_tables: Tensor
    query_lens_cpu: list[int]
    context_lens_cpu: list[int]
    num_decodes: int = field(init=False)

    def __post_init__(self) -> None:
        self.num_decodes = 0
        while self.num_decodes < len(self.query_lens_cpu) and self.query_lens_cpu[self.num_decodes] == 1:
            self.num_decodes += 1

    @property
    def num_seqs(self) -> int:
        return len(self.query_lens_cpu)

    @property
    def max_query_len(self) -> int:
        return max(self.query_lens_cpu)

    @property
    def max_context_len(self) -> int:
        return max(self.context_lens_cpu)

    def select(self, start: int, stop: int | None = None) -> AttentionMetadata:
        """Metadata of sequences start..stop-1 alone (rows renumbered from 0)."""
        stop = self.num_seqs if stop is None else stop
        first_row = sum(self.query_lens_cpu[:start])
        last_row = first_row + sum(self.query_lens_cpu[start:stop])
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[first_row:last_row],
            query_start_loc=self.query_start_loc[start:stop + 1] - first_row,
            context_lens=self.context_lens[start:stop],
            block_tables=self.block_tables[start:stop],
            query_lens_cpu=self.query_lens_cpu[start:stop],
            context_lens_cpu=self.context_lens_cpu[start:stop],
        )


def store_kvcache(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, slot_mapping: Tensor) -> None:
    """Writes the new tokens' keys and values into the cache, in place, through the slot mapping.

    k, v: (T, num_kv_heads, head_dim). k_cache, v_cache: (num_blocks, block_size, num_kv_heads,
    head_dim). Row t goes to flat slot slot_mapping[t] (= block * block_size + offset).
    """
    k_cache.view(-1, *k_cache.shape[2:])[slot_mapping] = k
    v_cache.view(-1, *v_cache.shape[2:])[slot_mapping] = v


def paged_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, meta: AttentionMetadata,
                    scale: float) -> Tensor:
    """Causal attention of each sequence's new tokens over its cached context (torch gather path).

    q: (T, num_heads, head_dim), rows grouped by sequence as in `meta`. num_heads is a multiple of
    num_kv_heads (grouped-query attention: query head h reads kv head h // (num_heads // num_kv_heads)).
    The new tokens' K/V are already in the cache. Gather each sequence's blocks through its block
    table, mask keys after the query's position and beyond the context, softmax(q k^T * scale) v.
    Returns (T, num_heads, head_dim) in q's dtype, rows in q's order.
    """
    num_tokens, num_heads, _ = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    max_q, max_ctx = meta.max_query_len, meta.max_context_len
    num_blocks = -(-max_ctx // block_size)
    tables = meta.block_tables[:, :num_blocks].long()
    k = k_cache[tables].flatten(1, 2)[:, :max_ctx]  # (B, L, Hkv, D)
    v = v_cache[tables].flatten(1, 2)[:, :max_ctx]
    group = num_heads // num_kv_heads
    if group > 1:
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    starts = meta.query_start_loc[:-1].long()
    q_lens = meta.query_start_loc[1:].long() - starts  # (B,)
    ctx = meta.context_lens.long()
    j = torch.arange(max_q, device=q.device)
    valid = j[None, :] < q_lens[:, None]  # (B, max_q): real query rows
    rows = (starts[:, None] + j[None, :]).clamp(max=num_tokens - 1)
    q_pad = q[rows]  # (B, max_q, H, D); padded rows hold copies, dropped below
    q_pos = (ctx - q_lens)[:, None] + j[None, :]  # (B, max_q) position of each query
    k_pos = torch.arange(max_ctx, device=q.device)
    mask = (k_pos[None, None, :] <= q_pos[:, :, None]) & (k_pos[None, None, :] < ctx[:, None, None])
    scores = q_pad.transpose(1, 2) @ k.permute(0, 2, 3, 1) * scale  # (B, H, max_q, L)
    scores = scores.float().masked_fill(~mask[:, None], float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)  # softmax in fp32, as HF's eager attention
    out = probs @ v.transpose(1, 2)  # (B, H, max_q, D)
    return out.transpose(1, 2)[valid]


def attend(q: Tensor, k_cache: Tensor, v_cache: Tensor, meta: AttentionMetadata, scale: float,
           backend: str) -> Tensor:
    """Dispatch: decode rows to the Triton paged-decode kernel when backend == "triton", the rest
    (and everything with backend "torch") to `paged_attention`."""
    if backend != "triton" or meta.num_decodes == 0:
        return _padded_in_groups(q, k_cache, v_cache, meta, scale)
    from .paged_decode_triton import paged_decode  # imports triton only when used

    nd = meta.num_decodes
    out_decode = paged_decode(q[:nd], k_cache, v_cache, meta.block_tables[:nd], meta.context_lens[:nd], scale)
    if nd == meta.num_seqs:
        return out_decode
    out_rest = _padded_in_groups(q[nd:], k_cache, v_cache, meta.select(nd), scale)
    return torch.cat([out_decode, out_rest])


def _padded_in_groups(q: Tensor, k_cache: Tensor, v_cache: Tensor, meta: AttentionMetadata,
                      scale: float) -> Tensor:
    """`paged_attention` over groups of consecutive sequences. Its scores are padded to
    (B, H, max query len, max context), so one long prompt among many short ones would cost
    B times its own scores; a group's padded size stays within (all query rows) x (max context),
    the bound the model runner's warm-up sets memory aside for."""
    q_lens, ctx_lens = meta.query_lens_cpu, meta.context_lens_cpu
    limit = sum(q_lens) * max(ctx_lens)
    groups, start = [], 0
    for end in range(1, meta.num_seqs + 1):
        if (end - start) * max(q_lens[start:end]) * max(ctx_lens[start:end]) > limit:
            groups.append((start, end - 1))
            start = end - 1
    groups.append((start, meta.num_seqs))
    if len(groups) == 1:
        return paged_attention(q, k_cache, v_cache, meta, scale)
    rows = [sum(q_lens[:a]) for a, _ in groups] + [len(q)]
    return torch.cat([paged_attention(q[rows[i]:rows[i + 1]], k_cache, v_cache, meta.select(a, b), scale)
                      for i, (a, b) in enumerate(groups)])

