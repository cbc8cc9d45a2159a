"""Recursive doubling all-reduce: log2(n) steps, each exchanging the whole vector with a partner
(Thakur, Rabenseifner & Gropp 2005). Few messages, many bytes: the choice for small messages,
where the per-message latency alpha dominates.

For n that is not a power of two, the standard fold: with p the largest power of two <= n and
e = n - p, the first 2e ranks pair up (0, 1), (2, 3), ...; each even rank sends its vector to the
odd one and sits out. The p remaining ranks (the odd ranks below 2e and every rank from 2e on)
run recursive doubling among themselves, then each odd rank below 2e sends the result back to its
even partner: two extra steps.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .p2p import exchange


def recursive_doubling_all_reduce(x: torch.Tensor) -> torch.Tensor:
    """Replace x on every rank by the sum of x over all ranks, in place; returns x itself.

    x: any shape, dtype and layout, the same on every rank. Any world size, with the fold above
    when it is not a power of two. In the doubling phase the p ranks are numbered 0 .. p-1 in rank
    order (the odd ranks below 2e, then the rest); at step k a rank exchanges its whole vector with
    the one whose number differs in bit k and adds what it receives. Every rank ends with the same
    bits (a + b == b + a exactly in floating point).
    """
    # BEGIN SOLUTION
    rank, world = dist.get_rank(), dist.get_world_size()
    work = x.view(-1) if x.is_contiguous() else x.contiguous().view(-1)  # (numel,)
    p = 1 << (world.bit_length() - 1)  # the largest power of two <= world
    extra = world - p
    scratch = torch.empty_like(work)
    if rank < 2 * extra and rank % 2 == 0:  # folded out: hand the vector over, get the sum back
        exchange(work, rank + 1, None, rank + 1)
        exchange(None, rank + 1, work, rank + 1)
    else:
        if rank < 2 * extra:  # take the even partner's vector first
            exchange(None, rank - 1, scratch, rank - 1)
            work += scratch
        me = rank // 2 if rank < 2 * extra else rank - extra
        mask = 1
        while mask < p:
            other = me ^ mask
            peer = 2 * other + 1 if other < extra else other + extra
            exchange(work, peer, scratch, peer)
            work += scratch
            mask <<= 1
        if rank < 2 * extra:
            exchange(work, rank - 1, None, rank - 1)
    if not x.is_contiguous():
        x.copy_(work.view(x.shape))
    return x
    # END SOLUTION
