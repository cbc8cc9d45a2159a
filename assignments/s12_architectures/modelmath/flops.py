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
    raise NotImplementedError("s12.7: linear_flops_per_token")


def attention_flops_per_pair(arch: Arch) -> int:
    """FLOPs of one (query, key) pair in one layer, all heads: q·k over the qk head size and p·v over
    the v head size."""
    raise NotImplementedError("s12.8: attention_flops_per_pair")


def latent_up_flops_per_key(arch: Arch) -> int:
    """MLA only (0 otherwise): FLOPs of projecting one cached latent up through kv_b, one layer."""
    raise NotImplementedError("s12.9: latent_up_flops_per_key")


def decode_flops(arch: Arch, context: int) -> int:
    """FLOPs of one decode step of one sequence: a new token attending to `context` keys (the cached
    ones and its own, context >= 1), through every layer, and its logits. ValueError for context < 1."""
    raise NotImplementedError("s12.10: decode_flops")


def prefill_flops(arch: Arch, tokens: int) -> int:
    """FLOPs of one forward over `tokens` prompt tokens with an empty cache, logits for the last token
    only (what an engine samples from), attention over causal pairs only (token i attends to
    keys 0..i: tokens*(tokens+1)/2 pairs, as a causal kernel that skips masked tiles computes).
    With MLA the latents are projected up once per token. ValueError for tokens < 1."""
    raise NotImplementedError("s12.11: prefill_flops")
