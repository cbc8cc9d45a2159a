"""FlashAttention-2 in Triton (capstone P6).

The graded API: flash_attention (differentiable), FlashAttentionFunction, flash_attn_forward
(returns o and the log-sum-exp), flash_attn_backward, the tile configuration BlockConfig, and the
packed variable-length batches: flash_attention_varlen (differentiable),
FlashAttentionVarlenFunction, flash_attn_varlen_forward, flash_attn_varlen_backward.
"""

from flashattn.backward import flash_attn_backward
from flashattn.config import AttnShape, BlockConfig, backward_configs, forward_config
from flashattn.forward import flash_attn_forward
from flashattn.function import FlashAttentionFunction, flash_attention
from flashattn.layout import RaggedLayout
from flashattn.varlen import (
    FlashAttentionVarlenFunction,
    flash_attention_varlen,
    flash_attn_varlen_backward,
    flash_attn_varlen_forward,
)

__all__ = [
    "AttnShape",
    "BlockConfig",
    "FlashAttentionFunction",
    "FlashAttentionVarlenFunction",
    "RaggedLayout",
    "backward_configs",
    "flash_attention",
    "flash_attention_varlen",
    "flash_attn_backward",
    "flash_attn_forward",
    "flash_attn_varlen_backward",
    "flash_attn_varlen_forward",
    "forward_config",
]
