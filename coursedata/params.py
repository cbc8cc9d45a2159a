"""Parameter counts computed from a Hugging Face config.json (dense, GQA, MoE and MLA models).

Supported `model_type`s: llama, mistral, qwen2 (bias on q/k/v), mixtral (top-k MoE),
deepseek_v3 (MLA attention, shared + routed experts, first_k_dense_replace dense layers, and
optionally its multi-token-prediction module). Counts include embeddings, norms and biases.
"""

from __future__ import annotations


def _attention(c: dict) -> int:
    """Q, K, V, O projections of one layer (grouped-query attention, optional q/k/v bias)."""
    h = c["hidden_size"]
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    hd = c.get("head_dim") or h // heads
    qkv_bias = c.get("attention_bias", False) or c["model_type"] == "qwen2"
    q, k = h * heads * hd, h * kv * hd
    bias = (heads * hd + 2 * kv * hd) if qkv_bias else 0
    o_bias = h if c.get("attention_bias", False) else 0
    return q + 2 * k + heads * hd * h + bias + o_bias


def _mla(c: dict) -> int:
    """DeepSeek multi-head latent attention of one layer (low-rank q and compressed kv)."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    q_rank, kv_rank = c.get("q_lora_rank"), c["kv_lora_rank"]
    q = h * heads * qk if not q_rank else h * q_rank + q_rank + q_rank * heads * qk
    kv = h * (kv_rank + c["qk_rope_head_dim"]) + kv_rank \
        + kv_rank * heads * (c["qk_nope_head_dim"] + c["v_head_dim"])
    return q + kv + heads * c["v_head_dim"] * h


def _mlp(h: int, inter: int) -> int:
    return 3 * h * inter  # gate, up, down (SwiGLU)


def _layers(c: dict, active: bool) -> int:
    h, n = c["hidden_size"], c["num_hidden_layers"]
    norms = 2 * h
    kind = c["model_type"]
    if kind in ("llama", "mistral", "qwen2"):
        return n * (_attention(c) + _mlp(h, c["intermediate_size"]) + norms)
    if kind == "mixtral":
        experts = c["num_experts_per_tok"] if active else c["num_local_experts"]
        router = h * c["num_local_experts"]
        return n * (_attention(c) + experts * _mlp(h, c["intermediate_size"]) + router + norms)
    if kind == "deepseek_v3":
        return sum(_deepseek_layer(c, i, active) for i in range(n))
    raise ValueError(f"param_count does not know model_type {kind!r}")


def _deepseek_layer(c: dict, index: int, active: bool) -> int:
    h = c["hidden_size"]
    dense = index < c["first_k_dense_replace"] or index % c.get("moe_layer_freq", 1) != 0
    if dense:
        mlp = _mlp(h, c["intermediate_size"])
    else:
        routed = c["num_experts_per_tok"] if active else c["n_routed_experts"]
        experts = (routed + c["n_shared_experts"]) * _mlp(h, c["moe_intermediate_size"])
        mlp = experts + h * c["n_routed_experts"] + c["n_routed_experts"]  # router + its bias
    return _mla(c) + mlp + 2 * h


def param_count(config: dict, *, active: bool = False, include_mtp: bool = False) -> int:
    """Number of parameters of the model that `config` (a parsed config.json) describes.

    active=True counts what one token uses: the top-k routed experts (plus shared experts)
    instead of all experts, embeddings and head included. include_mtp=True adds DeepSeek-V3's
    multi-token-prediction module (num_nextn_predict_layers extra layers, each with two norms,
    a 2h -> h projection and its own output norm; embedding and head are shared, not counted)."""
    c = config
    h, vocab = c["hidden_size"], c["vocab_size"]
    embed = vocab * h
    head = 0 if c.get("tie_word_embeddings", False) else vocab * h
    total = embed + head + _layers(c, active) + h  # + final norm
    if include_mtp and c["model_type"] == "deepseek_v3":
        n = c["num_hidden_layers"]
        for i in range(c.get("num_nextn_predict_layers", 0)):
            total += _deepseek_layer(c, n + i, active) + 3 * h + 2 * h * h
    return total
