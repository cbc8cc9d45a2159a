"""Tensor parallelism (Megatron-LM): linear layers, the embedding and the loss split over the ranks
of a tensor-parallel group, with the collectives in autograd functions so backward is right too.

    column-parallel  Y_r = X W_r^T + b_r         W split by rows (output features); X whole on every rank
    row-parallel     Y   = sum_r X_r W_r^T + b   W split by columns (input features); X split likewise

A column-parallel layer followed by a row-parallel one (an MLP, or attention's QKV then output
projection) needs one all-reduce forward (after the row layer, "g") and one backward (into the
column layer's input gradient, "f"): two per block per step, four per transformer layer.

Every function takes `group` (None: the default, whole-world group); "rank" and "world" below are
the rank in that group and its size. Shards follow torch.tensor_split: `size` items over `world`
ranks give the first size % world ranks one item more.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn


def shard_range(size: int, rank: int, world: int) -> tuple[int, int]:
    """[start, end) of shard `rank` of `size` items split over `world` ranks (tensor_split's rule:
    10 over 4 gives [0, 3), [3, 6), [6, 8), [8, 10)). ValueError unless 0 <= rank < world and
    size >= 0."""
    # BEGIN SOLUTION
    if world < 1 or not 0 <= rank < world or size < 0:
        raise ValueError(f"bad shard: size={size}, rank={rank}, world={world}")
    base, extra = divmod(size, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
    # END SOLUTION


def tp_shard(full: Tensor, dim: int, group: dist.ProcessGroup | None = None) -> Tensor:
    """This rank's slice of `full` along `dim` (shard_range of full.shape[dim])."""
    # BEGIN SOLUTION
    start, end = shard_range(full.shape[dim], dist.get_rank(group), dist.get_world_size(group))
    return full.narrow(dim, start, end - start)
    # END SOLUTION


class _CopyToRegion(torch.autograd.Function):
    """f: identity forward; backward sums the input gradient over the group."""

    @staticmethod
    def forward(ctx, x: Tensor, group: dist.ProcessGroup | None) -> Tensor:
        # BEGIN SOLUTION
        ctx.group = group
        return x.view_as(x)
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        # BEGIN SOLUTION
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None
        # END SOLUTION


class _ReduceFromRegion(torch.autograd.Function):
    """g: forward sums the partial results over the group; identity backward."""

    @staticmethod
    def forward(ctx, x: Tensor, group: dist.ProcessGroup | None) -> Tensor:
        # BEGIN SOLUTION
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        # BEGIN SOLUTION
        return grad, None
        # END SOLUTION


class _GatherFromRegion(torch.autograd.Function):
    """Forward concatenates the ranks' equal last-dim shards; backward keeps this rank's slice."""

    @staticmethod
    def forward(ctx, x: Tensor, group: dist.ProcessGroup | None) -> Tensor:
        # BEGIN SOLUTION
        ctx.group = group
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=-1)
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        # BEGIN SOLUTION
        return tp_shard(grad, -1, ctx.group).contiguous(), None
        # END SOLUTION


class _ScatterToRegion(torch.autograd.Function):
    """Forward keeps this rank's last-dim slice; backward concatenates the ranks' gradients."""

    @staticmethod
    def forward(ctx, x: Tensor, group: dist.ProcessGroup | None) -> Tensor:
        # BEGIN SOLUTION
        ctx.group = group
        return tp_shard(x, -1, group).contiguous()
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        # BEGIN SOLUTION
        parts = [torch.empty_like(grad) for _ in range(dist.get_world_size(ctx.group))]
        dist.all_gather(parts, grad.contiguous(), group=ctx.group)
        return torch.cat(parts, dim=-1), None
        # END SOLUTION


def copy_to_tp_region(x: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    return _CopyToRegion.apply(x, group)


def reduce_from_tp_region(x: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    return _ReduceFromRegion.apply(x, group)


def gather_from_tp_region(x: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    return _GatherFromRegion.apply(x, group)


def scatter_to_tp_region(x: Tensor, group: dist.ProcessGroup | None = None) -> Tensor:
    return _ScatterToRegion.apply(x, group)


def _divisible(n: int, group: dist.ProcessGroup | None, what: str) -> None:
    world = dist.get_world_size(group)
    if n % world != 0:
        raise ValueError(f"{what} = {n} must be divisible by the tensor-parallel size {world}")


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b with W (out_features, in_features) and b split by rows over the group: this
    rank holds W[start:end] and b[start:end] (out_features must divide evenly). forward(x) with x
    (..., in_features) whole on every rank returns this rank's (..., out_features / world), or the
    whole (..., out_features) with gather_output=True."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None, *, gather_output: bool = False,
                 group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        _divisible(weight.shape[0], group, "out_features")
        self.group, self.gather_output = group, gather_output
        self.weight = nn.Parameter(tp_shard(weight, 0, group).detach().clone())
        self.bias = nn.Parameter(tp_shard(bias, 0, group).detach().clone()) if bias is not None else None

    def forward(self, x: Tensor) -> Tensor:
        # BEGIN SOLUTION
        y = F.linear(copy_to_tp_region(x, self.group), self.weight, self.bias)
        return gather_from_tp_region(y, self.group) if self.gather_output else y
        # END SOLUTION


class RowParallelLinear(nn.Module):
    """y = x W^T + b with W (out_features, in_features) split by columns over the group: this rank
    holds W[:, start:end] (in_features must divide evenly); b (out_features,) is whole on every
    rank and added once, after the sum. forward(x) takes this rank's (..., in_features / world)
    slice (input_is_parallel=True) or the whole (..., in_features) input, and returns the whole
    (..., out_features) on every rank."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None, *, input_is_parallel: bool = True,
                 group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        _divisible(weight.shape[1], group, "in_features")
        self.group, self.input_is_parallel = group, input_is_parallel
        self.weight = nn.Parameter(tp_shard(weight, 1, group).detach().clone())
        self.bias = nn.Parameter(bias.detach().clone()) if bias is not None else None

    def forward(self, x: Tensor) -> Tensor:
        # BEGIN SOLUTION
        if not self.input_is_parallel:
            x = scatter_to_tp_region(x, self.group)
        y = reduce_from_tp_region(F.linear(x, self.weight), self.group)
        return y + self.bias if self.bias is not None else y
        # END SOLUTION


class VocabParallelEmbedding(nn.Module):
    """An embedding table (vocab_size, dim) split by rows (vocabulary ids) over the group, shards by
    shard_range (uneven splits allowed). forward(ids) with ids (...) whole on every rank returns
    the whole (..., dim) on every rank: each rank looks up the ids it holds, zeros for the rest,
    and the ranks sum."""

    def __init__(self, weight: Tensor, *, group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.group, self.vocab_size = group, weight.shape[0]
        self.vocab_start, self.vocab_end = shard_range(self.vocab_size, dist.get_rank(group), dist.get_world_size(group))
        self.weight = nn.Parameter(tp_shard(weight, 0, group).detach().clone())

    def forward(self, ids: Tensor) -> Tensor:
        # BEGIN SOLUTION
        outside = (ids < self.vocab_start) | (ids >= self.vocab_end)
        local = (ids - self.vocab_start).masked_fill(outside, 0)
        out = F.embedding(local, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        return reduce_from_tp_region(out, self.group)
        # END SOLUTION
