"""Matmul FLOPs of one decode step and of a prefill, counted from the architecture.

Counted: every matrix multiplication, as 2*m*n*k (a multiply and an add per term): the linear
layers (weights only: biases, norms, activations, softmax, rotary and the embedding lookup are
not matmuls) and attention's two products, q·k and p·v. Routed experts: the `top_k` a token
uses; the router's hidden -> num_experts projection is counted. The LM head is counted once per
token whose logits are computed, tied or not.

MLA as transformers runs it: the cache holds the compressed latent, and each step projects every
cached latent back up through kv_b (kv_lora_rank -> heads*(qk_nope_head_dim + v_head_dim)), then
attends with qk_head_dim and v_head_dim per head.
"""

from __future__ import annotations

from modelmath.arch import Arch, is_moe_layer


def linear_flops_per_token(arch: Arch, index: int) -> int:
    """FLOPs of layer `index`'s linear layers for one token: the projections of attention (with MLA:
    q_a/q_b or q, and kv_a, not kv_b, which scales with the context) and of the active MLP."""
    # BEGIN SOLUTION
    h, heads = arch.hidden_size, arch.num_heads
    if arch.mla is not None:
        m = arch.mla
        qk = heads * m.qk_head_dim
        q = h * qk if m.q_lora_rank is None else h * m.q_lora_rank + m.q_lora_rank * qk
        attn = q + h * (m.kv_lora_rank + m.qk_rope_head_dim) + heads * m.v_head_dim * h
    else:
        q, kv = heads * arch.head_dim, arch.num_kv_heads * arch.head_dim
        attn = 2 * h * q + 2 * h * kv
    if is_moe_layer(arch, index):
        moe = arch.moe
        mlp = (moe.top_k + moe.shared_experts) * 3 * h * moe.expert_intermediate + h * moe.num_experts
    else:
        mlp = 3 * h * arch.intermediate_size
    return 2 * (attn + mlp)
    # END SOLUTION


def attention_flops_per_pair(arch: Arch) -> int:
    """FLOPs of one (query, key) pair in one layer, all heads: q·k over the qk head size and p·v over
    the v head size."""
    # BEGIN SOLUTION
    if arch.mla is not None:
        return 2 * arch.num_heads * (arch.mla.qk_head_dim + arch.mla.v_head_dim)
    return 4 * arch.num_heads * arch.head_dim
    # END SOLUTION


def latent_up_flops_per_key(arch: Arch) -> int:
    """MLA only (0 otherwise): FLOPs of projecting one cached latent up through kv_b, one layer."""
    # BEGIN SOLUTION
    if arch.mla is None:
        return 0
    m = arch.mla
    return 2 * m.kv_lora_rank * arch.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
    # END SOLUTION


def decode_flops(arch: Arch, context: int) -> int:
    """FLOPs of one decode step of one sequence: a new token attending to `context` keys (the cached
    ones and its own, context >= 1), through every layer, and its logits. ValueError for context < 1."""
    # BEGIN SOLUTION
    if context < 1:
        raise ValueError(f"context must be >= 1 (the new token attends to itself), got {context}")
    per_key = attention_flops_per_pair(arch) + latent_up_flops_per_key(arch)
    layers = sum(linear_flops_per_token(arch, i) for i in range(arch.num_layers))
    return layers + arch.num_layers * per_key * context + 2 * arch.vocab_size * arch.hidden_size
    # END SOLUTION


def prefill_flops(arch: Arch, tokens: int) -> int:
    """FLOPs of one forward over `tokens` prompt tokens with an empty cache, logits for the last token
    only (what an engine samples from), attention over causal pairs only (token i attends to
    keys 0..i: tokens*(tokens+1)/2 pairs, as a causal kernel that skips masked tiles computes).
    With MLA the latents are projected up once per token. ValueError for tokens < 1."""
    # BEGIN SOLUTION
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    pairs = tokens * (tokens + 1) // 2
    layers = sum(linear_flops_per_token(arch, i) for i in range(arch.num_layers))
    attention = arch.num_layers * (attention_flops_per_pair(arch) * pairs + latent_up_flops_per_key(arch) * tokens)
    return tokens * layers + attention + 2 * arch.vocab_size * arch.hidden_size
    # END SOLUTION
