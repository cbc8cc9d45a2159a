"""Parameter counts from an `Arch`: what a checkpoint stores, and what one token uses.

Conventions (the same as the checkpoints'):
- every weight, bias and norm weight is counted; a tied LM head is the embedding, counted once;
- DeepSeek-V3's router score-correction bias is stored in the checkpoint (a buffer in transformers):
  counted, one number per routed expert, with the router;
- active (per token) = everything except the routed experts a token does not use: the embedding
  and head are included (Mistral AI's "12.9B active" for Mixtral counts them).
"""

from __future__ import annotations

from modelmath.arch import Arch, is_moe_layer


def gated_mlp_params(hidden: int, intermediate: int) -> int:
    """gate, up and down projections of one gated MLP (SwiGLU/GeGLU), no biases."""
    return 3 * hidden * intermediate


def attention_params(arch: Arch) -> int:
    """Parameters of one layer's attention block: projections, their biases and any q/k norms
    (not the layer's input norm).

    Standard attention: q is hidden -> heads*head_dim, k and v hidden -> kv_heads*head_dim, o
    heads*head_dim -> hidden. MLA: q_a (hidden -> q_lora_rank), its RMSNorm, q_b (q_lora_rank ->
    heads*qk_head_dim) or, without q_lora_rank, one hidden -> heads*qk_head_dim; kv_a (hidden ->
    kv_lora_rank + qk_rope_head_dim), its RMSNorm (kv_lora_rank), kv_b (kv_lora_rank ->
    heads*(qk_nope_head_dim + v_head_dim)); o heads*v_head_dim -> hidden.

    Biases (`from_config` sets them per family, see its docstring): in standard attention `qkv_bias`
    adds one per q, k and v output (heads*head_dim + 2*kv_heads*head_dim) and `o_bias` one per hidden
    unit. In MLA (transformers' DeepseekV3Attention) `qkv_bias` puts a bias on the two down
    projections, q_a (q_lora_rank numbers; none without q_lora_rank: the plain q projection has no
    bias) and kv_a (kv_lora_rank + qk_rope_head_dim), and `o_bias` one per hidden unit on o; q_b and
    kv_b never have one.
    """
    # BEGIN SOLUTION
    h, heads = arch.hidden_size, arch.num_heads
    if arch.mla is not None:
        m = arch.mla
        qk = heads * m.qk_head_dim
        q = h * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank \
            + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        biases = ((m.q_lora_rank or 0) + m.kv_lora_rank + m.qk_rope_head_dim if arch.qkv_bias else 0) \
            + (h if arch.o_bias else 0)
        return q + kv + heads * m.v_head_dim * h + biases
    q, kv = heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
    weights = h * q + 2 * h * kv + q * h
    biases = (q + 2 * kv if arch.qkv_bias else 0) + (h if arch.o_bias else 0)
    norms = 2 * arch.head_dim if arch.qk_norm else 0
    return weights + biases + norms
    # END SOLUTION


def mlp_params(arch: Arch, index: int, *, active: bool = False) -> int:
    """Parameters of layer `index`'s MLP block (dense or MoE, router included, not the norm).

    A dense layer's gated MLP has biases on gate, up and down (2*intermediate + hidden) when
    `arch.mlp_bias`; experts never do.

    A MoE layer holds the routed experts (all of them, or `top_k` when `active`), the shared
    experts, the router (hidden -> num_experts, no bias) and, where the family has it, the router's
    score-correction bias (num_experts numbers, counted whether active or not).
    """
    # BEGIN SOLUTION
    h = arch.hidden_size
    if not is_moe_layer(arch, index):
        bias = 2 * arch.intermediate_size + h if arch.mlp_bias else 0
        return gated_mlp_params(h, arch.intermediate_size) + bias
    moe = arch.moe
    routed = moe.top_k if active else moe.num_experts
    experts = (routed + moe.shared_experts) * gated_mlp_params(h, moe.expert_intermediate)
    return experts + h * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    # END SOLUTION


def layer_params(arch: Arch, index: int, *, active: bool = False) -> int:
    """One decoder layer: attention, MLP and its two RMSNorms (input, post-attention)."""
    return attention_params(arch) + mlp_params(arch, index, active=active) + 2 * arch.hidden_size


def param_count(arch: Arch, *, active: bool = False) -> int:
    """Parameters of the model (not the MTP module): embedding, layers, final norm, LM head
    (none of its own when tied). `active`: what one token uses (see the module's conventions)."""
    # BEGIN SOLUTION
    embed = arch.vocab_size * arch.hidden_size
    head = 0 if arch.tie_embeddings else embed
    layers = sum(layer_params(arch, i, active=active) for i in range(arch.num_layers))
    return embed + head + layers + arch.hidden_size
    # END SOLUTION


def mtp_params(arch: Arch) -> int:
    """DeepSeek-V3's multi-token-prediction module: `mtp_layers` extra layers, each a full decoder
    layer (with index num_layers + i) plus two RMSNorms of its inputs (enorm, hnorm), a projection
    2*hidden -> hidden (eh_proj, no bias) and its own output norm; the embedding and the head are
    shared with the model and not counted again. 0 for a model without MTP."""
    # BEGIN SOLUTION
    h = arch.hidden_size
    return sum(layer_params(arch, arch.num_layers + i) + 3 * h + 2 * h * h for i in range(arch.mtp_layers))
    # END SOLUTION


def unique_param_count(tensors: dict) -> int:
    """Numbers held by a state_dict-like {name: tensor}, shared tensors counted once.

    A tensor is identified by where its elements live: its storage, its `storage_offset()` and its
    `numel()`. Tensors equal in all three (a tied weight under two names, e.g. `embed_tokens.weight`
    and `lm_head.weight`, or a reshaped view of the same elements) count once, `numel()` numbers;
    any other tensor counts its own `numel()`, also when it shares a storage (two halves of one
    storage: both halves; a lone slice: its own elements, not the whole storage). Partly
    overlapping views, which no checkpoint holds, are not merged. Use the tensors' storages, not
    their names or values (an equal copy in its own storage counts again)."""
    # BEGIN SOLUTION
    seen: dict[tuple[int, int, int], int] = {}
    for t in tensors.values():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel())
        seen[key] = t.numel()
    return sum(seen.values())
    # END SOLUTION
