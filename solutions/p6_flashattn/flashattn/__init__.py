"""FlashAttention-2 in Triton (capstone P6).

The graded API: flash_attention (differentiable), FlashAttentionFunction, flash_attn_forward
(returns o and the log-sum-exp), flash_attn_backward, and the tile configuration BlockConfig.
"""

from flashattn.backward import flash_attn_backward
from flashattn.config import AttnShape, BlockConfig, backward_configs, forward_config
from flashattn.forward import flash_attn_forward
from flashattn.function import FlashAttentionFunction, flash_attention

__all__ = [
    "AttnShape",
    "BlockConfig",
    "FlashAttentionFunction",
    "backward_configs",
    "flash_attention",
    "flash_attn_backward",
    "flash_attn_forward",
    "forward_config",
]
