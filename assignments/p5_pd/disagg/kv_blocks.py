"""Moving a prompt's KV out of one paged pool and into another, whatever their block sizes.

A pool is P1's `ModelRunner.kv_cache`: one tensor for every layer, K and V, block and slot.
Two layouts of a block:
  "NHD" (P1's): (num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim)
  "HND":        (num_layers, 2, num_blocks, num_kv_heads, block_size, head_dim)
  (vLLM's FlashInfer and TensorRT-LLM keep a block head-major, so a token's K of one head is
  contiguous with the next token's.)

On the wire the KV of tokens [start, end) of one sequence is token-major and independent of both
pools: (num_layers, 2, end - start, num_kv_heads, head_dim). Token position p of a sequence lives
in physical block block_table[p // block_size], at offset p % block_size: the two sides give the
same token different blocks and offsets, so each side walks its own table.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

LAYOUTS = ("NHD", "HND")


def token_slots(block_table: Sequence[int], start: int, end: int, block_size: int) -> Tensor:
    """The flat slot (block * block_size + offset) of each token position start..end-1: (end - start,) int64.

    ValueError if start > end, start < 0, or a position beyond the table (end > len(block_table) * block_size).
    """
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    if end > len(block_table) * block_size:
        raise ValueError(f"position {end - 1} is beyond a table of {len(block_table)} blocks of {block_size}")
    raise NotImplementedError("p5.4: token_slots")


def _check_pool(kv_cache: Tensor, layout: str) -> tuple[int, int]:
    """(block_size, num_kv_heads) of a pool in `layout`."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if kv_cache.dim() != 6 or kv_cache.shape[1] != 2:
        raise ValueError(f"a KV pool is (layers, 2, blocks, ., ., head_dim), got shape {tuple(kv_cache.shape)}")
    block_size, heads = kv_cache.shape[3], kv_cache.shape[4]
    return (block_size, heads) if layout == "NHD" else (heads, block_size)


def gather_kv(kv_cache: Tensor, block_table: Sequence[int], start: int, end: int, layout: str = "NHD") -> Tensor:
    """The KV of token positions start..end-1 of one sequence, read from a paged pool.

    kv_cache: the pool, in `layout` (the block size is read from it). Returns a new contiguous
    tensor (num_layers, 2, end - start, num_kv_heads, head_dim) of the pool's dtype, on its device.
    """
    block_size, _ = _check_pool(kv_cache, layout)
    raise NotImplementedError("p5.5: gather_kv")


def scatter_kv(kv_cache: Tensor, block_table: Sequence[int], start: int, kv: Tensor, layout: str = "NHD") -> None:
    """Write kv (num_layers, 2, T, num_kv_heads, head_dim) into token positions start..start+T-1 of one
    sequence of a paged pool, in place. The pool's other slots are left as they were.

    ValueError when kv's layers, heads or head_dim differ from the pool's, or its dtype does (a
    conversion belongs to the sender, who knows what it casts).
    """
    block_size, heads = _check_pool(kv_cache, layout)
    want = (kv_cache.shape[0], 2, heads, kv_cache.shape[5])
    if kv.dim() != 5 or (kv.shape[0], kv.shape[1], kv.shape[3], kv.shape[4]) != want:
        raise ValueError(f"kv of shape {tuple(kv.shape)} does not fit a pool of (layers, 2, heads, head_dim) = {want}")
    if kv.dtype != kv_cache.dtype:
        raise ValueError(f"kv is {kv.dtype}, the pool {kv_cache.dtype}")
    raise NotImplementedError("p5.6: scatter_kv")
