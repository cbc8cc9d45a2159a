"""Ring collectives from point-to-point exchanges: reduce-scatter, all-gather, and all-reduce as
the two in a row (Patarasuk & Yuan; what NCCL's ring algorithm does).

The n ranks form a ring: each rank sends to rank + 1 and receives from rank - 1 (mod n). The
tensor is cut along dim 0 into n blocks (`chunk_sizes`): block b is owned by rank b. Each of the
n - 1 steps moves one block per rank, so every link carries 1/n of the data per step.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .p2p import chunk_sizes, exchange, offsets


def blocks_of(buf: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """Views of buf's consecutive dim-0 blocks of `sizes` rows (contiguous when buf is)."""
    return [buf[start : start + size] for start, size in zip(offsets(sizes), sizes)]


def reduce_scatter_blocks_(buf: torch.Tensor, sizes: list[int]) -> None:
    """The ring reduce-scatter, in place. buf: (sum(sizes), *rest), contiguous, the same shape on
    every rank. Afterwards block `rank` of buf holds the sum over all ranks of that block (the
    other blocks hold partial sums: scratch).

    Step s = 0 .. n-2: send block (rank - s - 1) % n to the right neighbour, receive block
    (rank - s - 2) % n from the left one and add it into your own copy of that block. At the last
    step you receive block `rank` with every other rank's contribution in it.
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    if world == 1:
        return
    blocks = blocks_of(buf, sizes)
    scratch = torch.empty((max(sizes), *buf.shape[1:]), dtype=buf.dtype, device=buf.device)
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(world - 1):
        send_i, recv_i = (rank - step - 1) % world, (rank - step - 2) % world
        incoming = scratch[: sizes[recv_i]]
        exchange(blocks[send_i], right, incoming, left)
        blocks[recv_i] += incoming
    # END SOLUTION


def all_gather_blocks_(buf: torch.Tensor, sizes: list[int]) -> None:
    """The ring all-gather, in place. buf: (sum(sizes), *rest), contiguous, with block `rank` filled
    in on each rank; afterwards every block holds its owner's data on every rank.

    Step s = 0 .. n-2: send block (rank - s) % n to the right neighbour (your own block first, then
    the one you just received) and receive block (rank - s - 1) % n from the left one, straight
    into its place in buf.
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    blocks = blocks_of(buf, sizes)
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(world - 1):
        send_i, recv_i = (rank - step) % world, (rank - step - 1) % world
        exchange(blocks[send_i], right, blocks[recv_i], left)
    # END SOLUTION


def ring_all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Replace x on every rank by the sum of x over all ranks, in place; returns x itself.

    x: any shape, dtype and layout, the same shape and dtype on every rank; any number of elements
    (none, fewer than the ranks, not divisible by them). Works on x's elements in order (x flattened),
    cut into chunk_sizes(x.numel(), world) blocks: a ring reduce-scatter, then a ring all-gather,
    2 (n - 1) steps of about numel / n elements each. Every rank ends with the same bits: each
    block is summed on one rank only, then copied.
    """
    # BEGIN SOLUTION
    world = dist.get_world_size()
    work = x.view(-1) if x.is_contiguous() else x.contiguous().view(-1)  # (numel,), x's own memory if it can be
    sizes = chunk_sizes(work.numel(), world)
    reduce_scatter_blocks_(work, sizes)
    all_gather_blocks_(work, sizes)
    if not x.is_contiguous():
        x.copy_(work.view(x.shape))
    return x
    # END SOLUTION


def ring_reduce_scatter(x: torch.Tensor, sizes: list[int] | None = None) -> torch.Tensor:
    """This rank's block of the sum of x over all ranks (x itself is left as it was).

    x: (N, *rest), the same shape and dtype on every rank. sizes: the rows of each rank's block,
    len(sizes) == world, sum(sizes) == N, zeros allowed; default chunk_sizes(N, world). Returns
    (sizes[rank], *rest): rows offsets(sizes)[rank] : + sizes[rank] of the sum. ValueError for a 0-d
    x or sizes that do not fit.
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    if x.dim() == 0:
        raise ValueError("ring_reduce_scatter: x must have at least one dimension (blocks are rows of dim 0)")
    sizes = chunk_sizes(x.shape[0], world) if sizes is None else list(sizes)
    if len(sizes) != world or min(sizes) < 0 or sum(sizes) != x.shape[0]:
        raise ValueError(f"ring_reduce_scatter: sizes {sizes} must be {world} numbers >= 0 summing to {x.shape[0]}")
    buf = x.clone(memory_format=torch.contiguous_format)
    reduce_scatter_blocks_(buf, sizes)
    start = offsets(sizes)[rank]
    return buf[start : start + sizes[rank]].clone()
    # END SOLUTION


def ring_all_gather(shard: torch.Tensor, sizes: list[int] | None = None) -> torch.Tensor:
    """Every rank's shard, concatenated along dim 0 in rank order, on every rank.

    shard: (sizes[rank], *rest), the same *rest and dtype on every rank. sizes: the rows of each
    rank's shard (len(sizes) == world, zeros allowed); default: every shard as long as this one.
    Returns (sum(sizes), *rest). ValueError for a 0-d shard, or sizes that do not fit it.
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    if shard.dim() == 0:
        raise ValueError("ring_all_gather: shard must have at least one dimension (blocks are rows of dim 0)")
    sizes = [shard.shape[0]] * world if sizes is None else list(sizes)
    if len(sizes) != world or min(sizes) < 0 or sizes[rank] != shard.shape[0]:
        raise ValueError(f"ring_all_gather: sizes {sizes} must be {world} numbers >= 0 with sizes[{rank}] == "
                         f"{shard.shape[0]} (this rank's rows)")
    out = torch.empty((sum(sizes), *shard.shape[1:]), dtype=shard.dtype, device=shard.device)
    start = offsets(sizes)[rank]
    out[start : start + sizes[rank]] = shard
    all_gather_blocks_(out, sizes)
    return out
    # END SOLUTION
