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
    raise NotImplementedError("s03.1: all_to_all")
