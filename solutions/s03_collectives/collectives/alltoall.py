"""All-to-all(v) by pairwise exchange: what MoE dispatch and combine (stage 9) and Ulysses
sequence parallelism run. Each rank holds one block for every rank, blocks of any size (zero
included); at step k = 1 .. n-1 a rank sends to rank + k and receives from rank - k, so every rank
sends and receives exactly one block per step and no link is idle."""

from __future__ import annotations

import torch
import torch.distributed as dist

from .p2p import exchange, offsets


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int]) -> torch.Tensor:
    """Send rows of x to every rank and receive every rank's rows for this one.

    x: (sum(send_splits), *rest): send_splits[j] rows for rank j, laid out in rank order.
    recv_splits[j]: how many rows rank j sends here (rank j's send_splits[rank]); both lists have
    one entry per rank, entries >= 0. Returns (sum(recv_splits), *rest): the rows from rank 0, then
    from rank 1, ... (this rank's own block copied across locally). x is left as it was.
    ValueError when the lists do not have `world` entries >= 0, send_splits does not sum to
    x.shape[0], or send_splits[rank] != recv_splits[rank].
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    send_splits, recv_splits = list(send_splits), list(recv_splits)
    if x.dim() == 0:
        raise ValueError("all_to_all: x must have at least one dimension (splits count rows of dim 0)")
    if len(send_splits) != world or len(recv_splits) != world or min(send_splits + recv_splits) < 0:
        raise ValueError(f"all_to_all: send_splits {send_splits} and recv_splits {recv_splits} must hold "
                         f"{world} numbers >= 0")
    if sum(send_splits) != x.shape[0]:
        raise ValueError(f"all_to_all: send_splits sum to {sum(send_splits)}, but x has {x.shape[0]} rows")
    if send_splits[rank] != recv_splits[rank]:
        raise ValueError(f"all_to_all: this rank sends itself {send_splits[rank]} rows but expects "
                         f"{recv_splits[rank]}")
    x = x.contiguous()
    out = torch.empty((sum(recv_splits), *x.shape[1:]), dtype=x.dtype, device=x.device)
    send_at, recv_at = offsets(send_splits), offsets(recv_splits)
    own = x[send_at[rank] : send_at[rank] + send_splits[rank]]
    out[recv_at[rank] : recv_at[rank] + recv_splits[rank]] = own
    for k in range(1, world):
        dst, src = (rank + k) % world, (rank - k) % world
        exchange(x[send_at[dst] : send_at[dst] + send_splits[dst]], dst,
                 out[recv_at[src] : recv_at[src] + recv_splits[src]], src)
    return out
    # END SOLUTION
