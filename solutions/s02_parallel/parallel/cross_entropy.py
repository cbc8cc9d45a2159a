"""Cross-entropy over vocabulary-parallel logits, without ever gathering the (tokens, vocab) matrix.

Each rank holds logits[:, start:end] of the output layer (a column-parallel lm_head). With
M = max over the whole row, S = sum over the whole row of exp(logit - M) and z_t the target's logit,

    loss = log S - (z_t - M),        d loss / d logit_j = softmax_j - [j == t].

M, S and z_t each need one all-reduce over the group (max, sum, sum: a rank that does not hold
the target contributes 0); the backward is local: each rank keeps its own softmax slice.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from .tensor_parallel import shard_range


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, vocab_size: int, group: dist.ProcessGroup | None) -> Tensor:
        # BEGIN SOLUTION
        start, end = shard_range(vocab_size, dist.get_rank(group), dist.get_world_size(group))
        if logits.shape[-1] != end - start:
            raise ValueError(f"this rank holds vocab ids [{start}, {end}): logits must have {end - start} "
                             f"columns, got {logits.shape[-1]}")
        logits = logits.float()
        row_max = logits.max(dim=-1).values  # (...,)
        dist.all_reduce(row_max, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - row_max.unsqueeze(-1)
        outside = (target < start) | (target >= end)
        local = (target - start).masked_fill(outside, 0)
        target_logit = shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0.0)
        dist.all_reduce(target_logit, group=group)
        exp = shifted.exp()
        sum_exp = exp.sum(dim=-1)
        dist.all_reduce(sum_exp, group=group)
        softmax = exp / sum_exp.unsqueeze(-1)  # (..., end - start): this rank's slice
        ctx.save_for_backward(softmax, local, outside)
        return sum_exp.log() - target_logit
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_loss: Tensor) -> tuple[Tensor, None, None, None]:
        # BEGIN SOLUTION
        softmax, local, outside = ctx.saved_tensors
        onehot = torch.zeros_like(softmax).scatter_(-1, local.unsqueeze(-1), 1.0)
        onehot = onehot.masked_fill(outside.unsqueeze(-1), 0.0)
        return (softmax - onehot) * grad_loss.unsqueeze(-1), None, None, None
        # END SOLUTION


def vocab_parallel_cross_entropy(logits: Tensor, target: Tensor, *, vocab_size: int,
                                 group: dist.ProcessGroup | None = None) -> Tensor:
    """Per-token cross-entropy losses (...,) of logits split by vocabulary over `group`.

    logits: (..., end - start), this rank's columns [start, end) = shard_range(vocab_size, rank,
    world) of the full (..., vocab_size) logits; target: (...) int64 ids in [0, vocab_size), the
    same on every rank. Returns the same losses on every rank; backward gives this rank's slice of
    d loss / d logits. ValueError when logits has the wrong number of columns."""
    return _VocabParallelCrossEntropy.apply(logits, target, vocab_size, group)
