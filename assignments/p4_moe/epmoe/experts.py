"""A rank's local experts on the rows dispatch delivered: the per-expert loop of torch matmuls (the
baseline the grouped GEMM is timed against), and the grouped path (rows sorted by slot, one
grouped Triton GEMM for all slots, unsorted back).

Local expert weights, stacked in the rank's slot order (placement.slots[rank]):
  gate (S, I, H), up (S, I, H), down (S, H, I).  expert(x) = down(silu(gate x) * up x).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def swiglu(x: Tensor, gate: Tensor, up: Tensor, down: Tensor) -> Tensor:
    """down(silu(gate x) * up x); x (N, H), gate/up (I, H), down (H, I)."""
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


def experts_loop(rows: Tensor, local_slots: Tensor, gate: Tensor, up: Tensor, down: Tensor) -> Tensor:
    """rows (N, H), local_slots (N,) in 0..S-1 -> (N, H): row i through expert local_slots[i],
    one swiglu per slot that received rows."""
    raise NotImplementedError("p4.7: experts_loop")


def experts_grouped(rows: Tensor, local_slots: Tensor, gate: Tensor, up: Tensor, down: Tensor) -> Tensor:
    """The same as experts_loop through grouped_swiglu: rows sorted by slot, offsets (S + 1,) with
    slot s's rows at offsets[s]:offsets[s + 1], the result put back in the rows' order."""
    from epmoe.grouped_gemm import grouped_swiglu

    raise NotImplementedError("p4.8: experts_grouped")
