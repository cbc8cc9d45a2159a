"""KV-cache bytes per token, and how many tokens a memory budget holds."""

from __future__ import annotations

from modelmath.arch import Arch


def kv_bytes_per_token(arch: Arch, dtype_bytes: int = 2) -> int:
    """Bytes of KV cache one token adds across all layers (not the MTP module).

    Standard attention caches a K and a V of num_kv_heads*head_dim per layer. MLA caches the
    compressed latent (kv_lora_rank) and the shared rope key (qk_rope_head_dim) per layer, not
    per-head keys and values: that is the point of MLA (DeepSeek-V3: 70,272 bytes in bf16).
    """
    raise NotImplementedError("s12.9: kv_bytes_per_token")


def max_cached_tokens(arch: Arch, memory_bytes: int, *, weight_bytes_per_param: float = 2.0,
                      dtype_bytes: int = 2) -> int:
    """Tokens of KV cache that fit in `memory_bytes` once the model's weights (param_count times
    `weight_bytes_per_param`, rounded up to a whole byte) are loaded: floor of what is left over the
    bytes per token. Raises ValueError when the weights alone do not fit (say by how much)."""
    raise NotImplementedError("s12.10: max_cached_tokens")
