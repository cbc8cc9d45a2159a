"""One pipeline stage of the tensor-parallel LLaMA: the first stage embeds, every stage runs its
layers [start, end), the last normalises and computes the logits. Numerics follow minivllm's model
(HF's): the residual adds happen in the next RMSNorm, and a stage hands the next one the residual
stream s = x + residual, whose first RMSNorm then adds nothing (the same fp32 sum, once)."""

from __future__ import annotations

from minivllm.attention import AttentionMetadata
from minivllm.model import DecoderLayer, LlamaForCausalLM, rope_cos_sin
from torch import Tensor, nn

from .comm import Comm
from .layers import TPMLP, TPAttention, VocabParallelEmbedding, VocabParallelLMHead
from .sharding import shard_heads, stage_layers


class TPDecoderLayer(nn.Module):
    """minivllm's DecoderLayer with its attention and MLP cut for this tp rank (norms replicated)."""

    def __init__(self, full: DecoderLayer, comm: Comm, layer: int) -> None:
        super().__init__()
        attn = full.self_attn
        shard = shard_heads(attn.num_heads, attn.num_kv_heads, comm.cfg.tp, comm.tp_rank)
        self.self_attn = TPAttention(attn, shard, comm, layer)
        self.mlp = TPMLP(full.mlp, comm, layer)
        self.input_layernorm, self.post_attention_layernorm = full.input_layernorm, full.post_attention_layernorm

    def forward(self, x: Tensor, residual: Tensor | None, cos: Tensor, sin: Tensor, meta: AttentionMetadata,
                kv: Tensor) -> tuple[Tensor, Tensor]:
        h, residual = self.input_layernorm(x, residual)
        h = self.self_attn(h, cos, sin, meta, kv[0], kv[1])
        h, residual = self.post_attention_layernorm(h, residual)
        return self.mlp(h), residual


class StageModel(nn.Module):
    """forward(ids or hidden, positions, meta, kv_cache) -> (T, hidden): ids (T,) on the first stage,
    the previous stage's stream (T, hidden) on the others. Returns the final normed hidden states on
    the last stage, else the stream to send on. kv_cache: (this stage's layers, 2, blocks, block_size,
    this rank's KV heads, head_dim)."""

    def __init__(self, full: LlamaForCausalLM, comm: Comm) -> None:
        super().__init__()
        cfg = full.config
        self.config, self.comm = cfg, comm
        self.start, self.end = stage_layers(cfg.num_layers, comm.cfg.pp, comm.stage)
        self.layers = nn.ModuleList(TPDecoderLayer(full.model.layers[i], comm, i) for i in range(self.start, self.end))
        self.embed = VocabParallelEmbedding(full.model.embed_tokens.weight, comm) if comm.is_first else None
        self.norm = full.model.norm if comm.is_last else None
        self.lm_head = VocabParallelLMHead(full.lm_head.weight, comm) if comm.is_last else None
        if cfg.tie_word_embeddings and self.embed is not None and self.lm_head is not None:
            self.lm_head.weight = self.embed.weight  # one tensor: the same vocabulary rows at both ends

    @property
    def num_kv_heads(self) -> int:
        return self.layers[0].self_attn.num_kv_heads

    def forward(self, x: Tensor, positions: Tensor, meta: AttentionMetadata, kv_cache: Tensor) -> Tensor:
        # BEGIN SOLUTION
        if self.embed is not None:
            x = self.embed(x)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, x.dtype)
        residual = None
        for layer, kv in zip(self.layers, kv_cache):
            x, residual = layer(x, residual, cos, sin, meta, kv)
        if self.norm is not None:
            return self.norm(x, residual)[0]
        return x + residual
        # END SOLUTION

    def compute_logits(self, hidden: Tensor) -> Tensor:
        """(S, hidden) -> (S, vocab) fp32 on every tp rank of the last stage."""
        return self.lm_head(hidden)
