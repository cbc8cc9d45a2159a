"""Where each rank's shard of a flat buffer lies (ZeRO's partitioning).

All parameters, flattened in registration order and concatenated, form one flat vector of `numel`
elements. It is padded to world * ceil(numel / world) so that every rank owns an equal chunk
(what reduce-scatter and all-gather need); rank r owns [r * s, min((r + 1) * s, numel)) of the real
elements, s = ceil(numel / world). The last ranks may own fewer real elements, or none.
"""

from __future__ import annotations

import torch
from torch import Tensor


def shard_size(numel: int, world: int) -> int:
    """s = ceil(numel / world): the padded chunk every rank owns."""
    if numel < 0 or world < 1:
        raise ValueError(f"shard_size: need numel >= 0 and world >= 1, got {numel}, {world}")
    raise NotImplementedError("s07.13: shard_size")


def shard_bounds(numel: int, rank: int, world: int) -> tuple[int, int]:
    """[start, end) of the real elements rank `rank` owns (end - start may be 0 on the last ranks)."""
    if not 0 <= rank < world:
        raise ValueError(f"shard_bounds: rank {rank} outside a world of {world}")
    raise NotImplementedError("s07.14: shard_bounds")


def flatten(tensors: list[Tensor], padded_to: int) -> Tensor:
    """The tensors flattened and concatenated, zero-padded to `padded_to` elements. (padded_to,)"""
    flat = torch.cat([t.reshape(-1) for t in tensors]) if tensors else torch.zeros(0)
    if flat.numel() > padded_to:
        raise ValueError(f"flatten: {flat.numel()} elements do not fit in {padded_to}")
    return torch.cat([flat, flat.new_zeros(padded_to - flat.numel())])
