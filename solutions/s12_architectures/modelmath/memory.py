"""KV-cache bytes per token, and how many tokens a memory budget holds."""

from __future__ import annotations

from modelmath.arch import Arch


def kv_bytes_per_token(arch: Arch, dtype_bytes: int = 2) -> int:
    """Bytes of KV cache one token adds across all layers (not the MTP module).

    Standard attention caches a K and a V of num_kv_heads*head_dim per layer. MLA caches the
    compressed latent (kv_lora_rank) and the shared rope key (qk_rope_head_dim) per layer, not
    per-head keys and values: that is the point of MLA (DeepSeek-V3: 70,272 bytes in bf16).
    """
    # BEGIN SOLUTION
    if arch.mla is not None:
        per_layer = arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim
    else:
        per_layer = 2 * arch.num_kv_heads * arch.head_dim
    return arch.num_layers * per_layer * dtype_bytes
    # END SOLUTION


def max_cached_tokens(arch: Arch, memory_bytes: int, *, weight_bytes_per_param: float = 2.0,
                      dtype_bytes: int = 2) -> int:
    """Tokens of KV cache that fit in `memory_bytes` once the model's weights are loaded: floor of
    what is left over `kv_bytes_per_token(arch, dtype_bytes)`.

    The weights take `math.ceil(param_count(arch) * weight_bytes_per_param)` bytes, the product
    computed in Python floats as written, not in exact decimals (DeepSeek-V3 at 0.07 byte a
    parameter: 46,971,849,345 bytes, one more than 671,026,419,200 x 7/100). Weights exactly
    equal to `memory_bytes` leave 0 tokens, not an error. Weights larger than `memory_bytes` raise
    ValueError whose message names the shortfall (weights minus memory_bytes) in bytes as an
    integer, with or without thousands separators ("61,107,412,992", "61_107_412_992" or
    "61107412992": LLaMA-3-70B in bf16 on 80 GB)."""
    # BEGIN SOLUTION
    import math

    from modelmath.counts import param_count

    weights = math.ceil(param_count(arch) * weight_bytes_per_param)
    left = memory_bytes - weights
    if left < 0:
        raise ValueError(f"the weights need {weights:,} bytes, {-left:,} more than the {memory_bytes:,} given")
    return left // kv_bytes_per_token(arch, dtype_bytes)
    # END SOLUTION
