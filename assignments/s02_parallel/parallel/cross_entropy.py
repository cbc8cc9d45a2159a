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
        raise NotImplementedError("s02.1: _VocabParallelCrossEntropy.forward")

    @staticmethod
    def backward(ctx, grad_loss: Tensor) -> tuple[Tensor, None, None, None]:
        raise NotImplementedError("s02.2: _VocabParallelCrossEntropy.backward")


def vocab_parallel_cross_entropy(logits: Tensor, target: Tensor, *, vocab_size: int,
                                 group: dist.ProcessGroup | None = None) -> Tensor:
    """Per-token cross-entropy losses (...,) of logits split by vocabulary over `group`.

    logits: (..., end - start), this rank's columns [start, end) = shard_range(vocab_size, rank,
    world) of the full (..., vocab_size) logits; target: (...) int64 ids in [0, vocab_size), the
    same on every rank. Returns the same losses on every rank; backward gives this rank's slice of
    d loss / d logits. ValueError when logits has the wrong number of columns."""
    return _VocabParallelCrossEntropy.apply(logits, target, vocab_size, group)
