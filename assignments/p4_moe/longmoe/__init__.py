"""Long context and MoE routing (stage 9): RoPE scaling, ring attention, DeepSeek-V3's gate."""

from longmoe.attention import block_attention, merge_attention, visible
from longmoe.deepseek_gate import GateConfig, deepseek_v3_gate, group_mask
from longmoe.moe_layer import moe_forward
from longmoe.ring import ring_attention, shard_positions
from longmoe.rope_scaling import RopeScaling, rope_inv_freq, yarn_attention_factor
from longmoe.routing import switch_load_balancing_loss, topk_softmax_routing

__all__ = ["GateConfig", "RopeScaling", "block_attention", "deepseek_v3_gate", "group_mask", "merge_attention",
           "moe_forward", "ring_attention", "rope_inv_freq", "shard_positions", "switch_load_balancing_loss",
           "topk_softmax_routing", "visible", "yarn_attention_factor"]
