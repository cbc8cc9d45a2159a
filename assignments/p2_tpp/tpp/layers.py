"""Tensor-parallel layers of the LLaMA, cut from the full model's weights (minivllm's, loaded on
every rank; each rank keeps only its slices).

Megatron's f/g pair in inference: f (identity forward) sits where a column-parallel projection reads
the replicated input, g (all-reduce) where a row-parallel projection's partial sums meet. One
all-reduce after attention's o_proj, one after the MLP's down_proj: two per layer. The embedding
and the LM head are vocab-parallel and share one slice of the tied weight: rows [v0, v1) of the
vocabulary on tp rank r, at both ends."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from minivllm.attention import AttentionMetadata, attend, store_kvcache
from minivllm.model import Attention, MLP, apply_rope
from torch import Tensor, nn

from .comm import Comm
from .sharding import HeadShard, split_range


def _frozen(w: Tensor) -> nn.Parameter:
    """A slice kept as its own contiguous parameter (the full weight can then be freed)."""
    return nn.Parameter(w.detach().contiguous().clone(), requires_grad=False)


class TPAttention(nn.Module):
    """q/k/v column-parallel by head, o_proj row-parallel; one all-reduce.

    weights: q (hq * D, hidden), k and v (hkv * D, hidden), o (hidden, hq * D), where hq, hkv are
    this rank's query and KV heads (shard)."""

    def __init__(self, full: Attention, shard: HeadShard, comm: Comm, layer: int) -> None:
        super().__init__()
        self.comm, self.layer, self.backend = comm, layer, full.backend
        self.head_dim, self.scale = full.head_dim, full.scale
        self.num_heads = shard.q_end - shard.q_start
        self.num_kv_heads = shard.kv_end - shard.kv_start
        raise NotImplementedError("p2.7: TPAttention.__init__")

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, meta: AttentionMetadata,
                k_cache: Tensor, v_cache: Tensor) -> Tensor:
        """x: (T, hidden), replicated. Writes this rank's KV heads into its cache shard
        (blocks, block_size, hkv, D); returns the all-reduced (T, hidden)."""
        raise NotImplementedError("p2.8: TPAttention.forward")


class TPMLP(nn.Module):
    """gate/up column-parallel over intermediate columns [c0, c1), down row-parallel; one all-reduce."""

    def __init__(self, full: MLP, comm: Comm, layer: int) -> None:
        super().__init__()
        self.comm, self.layer = comm, layer
        raise NotImplementedError("p2.9: TPMLP.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """x: (T, hidden), replicated -> the all-reduced (T, hidden)."""
        raise NotImplementedError("p2.10: TPMLP.forward")


class VocabParallelEmbedding(nn.Module):
    """Rows [v0, v1) of the embedding on this tp rank (v0, v1 = split_range(vocab, tp_rank, tp))."""

    def __init__(self, weight: Tensor, comm: Comm) -> None:
        super().__init__()
        self.comm = comm
        raise NotImplementedError("p2.11: VocabParallelEmbedding.__init__")

    def forward(self, ids: Tensor) -> Tensor:
        """ids: (T,) int64 over the whole vocabulary -> (T, hidden): each rank looks up the ids it
        holds, zeros elsewhere, and one all-reduce sums the ranks' rows."""
        raise NotImplementedError("p2.12: VocabParallelEmbedding.forward")


class VocabParallelLMHead(nn.Module):
    """Logits of vocabulary rows [v0, v1) on this rank, all-gathered to (S, vocab) fp32 on every rank.
    With tied embeddings the weight is the embedding's own slice, the same rows on the same rank."""

    def __init__(self, weight: Tensor, comm: Comm) -> None:
        super().__init__()
        self.comm = comm
        self.out_features = weight.shape[0]  # the whole vocabulary: the width of forward's output
        raise NotImplementedError("p2.13: VocabParallelLMHead.__init__")

    def forward(self, hidden: Tensor) -> Tensor:
        """(S, hidden) -> (S, vocab) fp32, identical on every tp rank."""
        raise NotImplementedError("p2.14: VocabParallelLMHead.forward")
