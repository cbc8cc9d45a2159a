"""Dispatch and combine: the two all-to-alls of an expert-parallel MoE layer.

dispatch: each of a rank's T tokens has k physical slots (T, k). The T*k (token, choice) rows are
sorted by slot (stable: ties keep token-major, choice-minor order), which groups them by destination
rank (slot // S) and, within it, by local slot. The per-destination row counts are exchanged first
(all_to_all_single of `world` int64 counts): a rank must know how many rows each peer sends before
it can size the buffer for them. Then the rows and their local slot ids cross.
Received rows come source rank by source rank (rank 0's first); within a source, in its sorted order.

combine: the expert outputs (one per received row, in the received order) go back with the
inverse all-to-all (the splits swapped), are put back into (token, choice) order (the inverse of
dispatch's sort), weighted by the gate's weights and summed over the k choices.

Every rank calls both, also with T = 0 tokens (an idle DP rank): the all-to-alls are collectives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

from epmoe.placement import ExpertPlacement


@dataclass
class DispatchHandle:
    """What combine needs to undo a dispatch. order (T*k,): the sorted position -> flat (token,
    choice) index; send_counts[j] rows went to rank j; recv_counts[j] rows came from rank j;
    recv_slots (N,): each received row's local slot (0..S-1)."""

    order: Tensor
    send_counts: list[int]
    recv_counts: list[int]
    recv_slots: Tensor
    num_tokens: int
    top_k: int


def exchange_counts(send_counts: list[int]) -> list[int]:
    """send_counts[j]: rows this rank sends rank j -> recv_counts[j]: rows rank j sends this rank
    (one all_to_all_single of `world` int64 values)."""
    # BEGIN SOLUTION
    send = torch.tensor(send_counts, dtype=torch.int64)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.tolist()
    # END SOLUTION


def dispatch(x: Tensor, slots: Tensor, placement: ExpertPlacement) -> tuple[Tensor, DispatchHandle]:
    """x (T, H), slots (T, k) physical slot ids -> (received rows (N, H) in x's dtype, handle)."""
    if slots.shape[0] != x.shape[0] or slots.dim() != 2:
        raise ValueError(f"dispatch: slots {tuple(slots.shape)} must be (T, k) with T = {x.shape[0]}")
    # BEGIN SOLUTION
    world, per_rank = placement.world, placement.slots_per_rank
    top_k = slots.shape[1]
    flat = slots.reshape(-1)
    order = torch.sort(flat, stable=True).indices  # (T*k,) grouped by destination, then local slot
    send_counts = torch.bincount(flat // per_rank, minlength=world).tolist()
    recv_counts = exchange_counts(send_counts)  # sizes first: the receive buffers depend on them
    rows = x[order // top_k].contiguous()
    recv = x.new_empty((sum(recv_counts), x.shape[1]))
    dist.all_to_all_single(recv, rows, recv_counts, send_counts)
    local = (flat[order] % per_rank).contiguous()
    recv_slots = torch.empty(sum(recv_counts), dtype=torch.int64)
    dist.all_to_all_single(recv_slots, local, recv_counts, send_counts)
    return recv, DispatchHandle(order, send_counts, recv_counts, recv_slots, x.shape[0], top_k)
    # END SOLUTION


def combine(y: Tensor, handle: DispatchHandle, weights: Tensor) -> Tensor:
    """y (N, H): the expert output of each received row, in dispatch's received order; weights
    (T, k) the gate's -> (T, H) in y's dtype: out[t] = sum_c weights[t, c] * y_row(t, c), summed in fp32."""
    if y.shape[0] != sum(handle.recv_counts):
        raise ValueError(f"combine: y has {y.shape[0]} rows, dispatch received {sum(handle.recv_counts)}")
    # BEGIN SOLUTION
    back = y.new_empty((sum(handle.send_counts), y.shape[1]))
    dist.all_to_all_single(back, y.contiguous(), handle.send_counts, handle.recv_counts)
    rows = torch.empty_like(back)
    rows[handle.order] = back  # sorted position i held flat (token, choice) order[i]
    rows = rows.view(handle.num_tokens, handle.top_k, y.shape[1]).float()
    return (rows * weights.float()[:, :, None]).sum(dim=1).to(y.dtype)
    # END SOLUTION
