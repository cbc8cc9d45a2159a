"""Ring attention (context parallelism): the sequence is split over the ranks of a group; each
rank keeps its queries and passes its key/value block around the ring, so after world - 1 steps
every query has seen every key while no rank ever held more than two key/value blocks.

Layouts of a sequence of n tokens over W ranks (n divisible by 2W for zigzag, by W otherwise):
  contiguous: rank r holds positions [r n/W, (r + 1) n/W).
  zigzag:     cut into 2W chunks of n/(2W); rank r holds chunk r then chunk 2W - 1 - r. Under a
              causal mask every rank then has the same number of visible (query, key) pairs.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from longmoe.attention import block_attention, merge_attention

LAYOUTS = ("contiguous", "zigzag")


def shard_positions(seq_len: int, rank: int, world: int, layout: str) -> Tensor:
    """Global positions (int64, ascending within each chunk, in the order the rank stores its
    tokens) of rank `rank`'s shard."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")
    parts = 2 * world if layout == "zigzag" else world
    if seq_len % parts or not 0 <= rank < world:
        raise ValueError(f"seq_len {seq_len} over {world} ranks ({layout}): needs a multiple of {parts}, rank < world")
    if layout == "contiguous":
        size = seq_len // world
        return torch.arange(rank * size, (rank + 1) * size)
    size = seq_len // (2 * world)
    first, second = rank, 2 * world - 1 - rank
    return torch.cat([torch.arange(first * size, (first + 1) * size),
                      torch.arange(second * size, (second + 1) * size)])


def _pass_along(blocks: list[Tensor], group) -> list[Tensor]:
    """Send each tensor to the next rank of the ring, receive the previous rank's."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    nxt = dist.get_global_rank(group, (rank + 1) % world) if group is not None else (rank + 1) % world
    prv = dist.get_global_rank(group, (rank - 1) % world) if group is not None else (rank - 1) % world
    received = [torch.empty_like(b) for b in blocks]
    ops = [dist.P2POp(dist.isend, b.contiguous(), nxt, group) for b in blocks]
    ops += [dist.P2POp(dist.irecv, r, prv, group) for r in received]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    return received


def ring_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool, window: int | None = None,
                   layout: str = "contiguous", group=None) -> Tensor:
    """This rank's attention output over the whole sequence. q, k, v: (B, H, T_local, D), this
    rank's shard in `layout` (seq_len = T_local * world); returns (B, H, T_local, D). At step s
    the rank holds the key/value block of rank (rank - s) mod world, attends to it with the
    masks of the blocks' global positions, merges by log-sum-exp, and passes it on."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    seq_len = q.shape[-2] * world
    q_pos = shard_positions(seq_len, rank, world, layout)
    out, lse = None, None
    for step in range(world):
        source = (rank - step) % world
        k_pos = shard_positions(seq_len, source, world, layout)
        part, part_lse = block_attention(q, k, v, q_pos, k_pos, causal=causal, window=window)
        out, lse = (part, part_lse) if out is None else merge_attention(out, lse, part, part_lse)
        if step < world - 1:
            k, v = _pass_along([k, v], group)
    return out
