"""Point-to-point building blocks: how a tensor is cut into per-rank blocks, and one paired exchange.

Every collective of this package is made of `exchange` calls: a rank sends one block to a peer
while it receives another block from a (possibly different) peer.
"""

from __future__ import annotations

import itertools

import torch
import torch.distributed as dist


def chunk_sizes(n: int, world: int) -> list[int]:
    """Split n items into `world` contiguous blocks as evenly as possible: the first n % world
    blocks get one item more (torch.tensor_split's rule). E.g. chunk_sizes(10, 4) == [3, 3, 2, 2],
    chunk_sizes(2, 4) == [1, 1, 0, 0]. ValueError for n < 0 or world < 1."""
    # BEGIN SOLUTION
    if n < 0 or world < 1:
        raise ValueError(f"chunk_sizes: need n >= 0 and world >= 1, got n={n}, world={world}")
    base, extra = divmod(n, world)
    return [base + 1 if r < extra else base for r in range(world)]
    # END SOLUTION


def offsets(sizes: list[int]) -> list[int]:
    """Start of each block when blocks of `sizes` are laid end to end: [0, s0, s0 + s1, ...]."""
    return [0, *itertools.accumulate(sizes)][:-1] if sizes else []


def exchange(send: torch.Tensor | None, dst: int, recv: torch.Tensor | None, src: int) -> None:
    """Send `send` to rank `dst` and receive into `recv` from rank `src`, at the same time; return
    when both are done. Either side may be None or empty: nothing is sent or received then, and the
    peer must skip its side too (both ends know a block's size, so they agree). Both tensors must
    be contiguous (a slice of dim 0 of a contiguous tensor is).

    Post both with `dist.isend` / `dist.irecv`, then wait for both: with two blocking calls, two
    ranks that both send first can wait on each other for ever. When one peer is on both sides
    (dst == src, e.g. two ranks), the lower rank posts its send first and the higher rank its
    receive first: on NCCL a pair's sends and receives run in order on one stream, and two sends
    that each wait for the other's receive would hang.
    """
    # BEGIN SOLUTION
    sending = send is not None and send.numel() > 0
    receiving = recv is not None and recv.numel() > 0
    recv_first = dst == src and dist.get_rank() > src
    requests = []
    if receiving and recv_first:
        requests.append(dist.irecv(recv, src))
    if sending:
        requests.append(dist.isend(send, dst))
    if receiving and not recv_first:
        requests.append(dist.irecv(recv, src))
    for request in requests:
        request.wait()
    # END SOLUTION
