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
    """Tokens of KV cache that fit in `memory_bytes` once the model's weights (param_count times
    `weight_bytes_per_param`, rounded up to a whole byte) are loaded: floor of what is left over the
    bytes per token. Raises ValueError when the weights alone do not fit (say by how much)."""
    # BEGIN SOLUTION
    import math

    from modelmath.params import param_count

    weights = math.ceil(param_count(arch) * weight_bytes_per_param)
    left = memory_bytes - weights
    if left < 0:
        raise ValueError(f"the weights need {weights:,} bytes, {-left:,} more than the {memory_bytes:,} given")
    return left // kv_bytes_per_token(arch, dtype_bytes)
    # END SOLUTION
