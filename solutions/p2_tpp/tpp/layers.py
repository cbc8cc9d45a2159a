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
        # BEGIN SOLUTION
        d = full.head_dim
        q_rows = slice(shard.q_start * d, shard.q_end * d)
        kv_rows = slice(shard.kv_start * d, shard.kv_end * d)
        self.wq = _frozen(full.q_proj.weight[q_rows])
        self.wk = _frozen(full.k_proj.weight[kv_rows])
        self.wv = _frozen(full.v_proj.weight[kv_rows])
        self.wo = _frozen(full.o_proj.weight[:, q_rows])
        # END SOLUTION

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, meta: AttentionMetadata,
                k_cache: Tensor, v_cache: Tensor) -> Tensor:
        """x: (T, hidden), replicated. Writes this rank's KV heads into its cache shard
        (blocks, block_size, hkv, D); returns the all-reduced (T, hidden)."""
        # BEGIN SOLUTION
        t, d = x.shape[0], self.head_dim
        with self.comm.timeline.span("compute", f"layer {self.layer} attention"):
            q = apply_rope(F.linear(x, self.wq).view(t, self.num_heads, d), cos, sin)
            k = apply_rope(F.linear(x, self.wk).view(t, self.num_kv_heads, d), cos, sin)
            v = F.linear(x, self.wv).view(t, self.num_kv_heads, d)
            store_kvcache(k, v, k_cache, v_cache, meta.slot_mapping)
            out = attend(q, k_cache, v_cache, meta, self.scale, self.backend)  # (T, hq, D)
            partial = F.linear(out.reshape(t, self.num_heads * d), self.wo)
        return self.comm.all_reduce(partial, f"layer {self.layer} o_proj")
        # END SOLUTION


class TPMLP(nn.Module):
    """gate/up column-parallel over intermediate columns [c0, c1), down row-parallel; one all-reduce."""

    def __init__(self, full: MLP, comm: Comm, layer: int) -> None:
        super().__init__()
        self.comm, self.layer = comm, layer
        # BEGIN SOLUTION
        c0, c1 = split_range(full.gate_proj.weight.shape[0], comm.tp_rank, comm.cfg.tp)
        self.w_gate = _frozen(full.gate_proj.weight[c0:c1])
        self.w_up = _frozen(full.up_proj.weight[c0:c1])
        self.w_down = _frozen(full.down_proj.weight[:, c0:c1])
        # END SOLUTION

    def forward(self, x: Tensor) -> Tensor:
        """x: (T, hidden), replicated -> the all-reduced (T, hidden)."""
        # BEGIN SOLUTION
        with self.comm.timeline.span("compute", f"layer {self.layer} mlp"):
            partial = F.linear(F.silu(F.linear(x, self.w_gate)) * F.linear(x, self.w_up), self.w_down)
        return self.comm.all_reduce(partial, f"layer {self.layer} down_proj")
        # END SOLUTION


class VocabParallelEmbedding(nn.Module):
    """Rows [v0, v1) of the embedding on this tp rank (v0, v1 = split_range(vocab, tp_rank, tp))."""

    def __init__(self, weight: Tensor, comm: Comm) -> None:
        super().__init__()
        self.comm = comm
        # BEGIN SOLUTION
        self.v0, self.v1 = split_range(weight.shape[0], comm.tp_rank, comm.cfg.tp)
        self.weight = _frozen(weight[self.v0:self.v1])
        # END SOLUTION

    def forward(self, ids: Tensor) -> Tensor:
        """ids: (T,) int64 over the whole vocabulary -> (T, hidden): each rank looks up the ids it
        holds, zeros elsewhere, and one all-reduce sums the ranks' rows."""
        # BEGIN SOLUTION
        with self.comm.timeline.span("compute", "embedding"):
            outside = (ids < self.v0) | (ids >= self.v1)
            rows = F.embedding((ids - self.v0).masked_fill(outside, 0), self.weight)
            rows = rows.masked_fill(outside[:, None], 0.0)
        return self.comm.all_reduce(rows, "embedding")
        # END SOLUTION


class VocabParallelLMHead(nn.Module):
    """Logits of vocabulary rows [v0, v1) on this rank, all-gathered to (S, vocab) fp32 on every rank.
    With tied embeddings the weight is the embedding's own slice, the same rows on the same rank."""

    def __init__(self, weight: Tensor, comm: Comm) -> None:
        super().__init__()
        self.comm = comm
        self.out_features = weight.shape[0]  # the whole vocabulary: the width of forward's output
        # BEGIN SOLUTION
        v0, v1 = split_range(weight.shape[0], comm.tp_rank, comm.cfg.tp)
        self.weight = _frozen(weight[v0:v1])
        # END SOLUTION

    def forward(self, hidden: Tensor) -> Tensor:
        """(S, hidden) -> (S, vocab) fp32, identical on every tp rank."""
        # BEGIN SOLUTION
        with self.comm.timeline.span("compute", "lm_head"):
            local = F.linear(hidden, self.weight).float()  # (S, vocab / tp)
        return self.comm.all_gather_last(local, "lm_head")
        # END SOLUTION
