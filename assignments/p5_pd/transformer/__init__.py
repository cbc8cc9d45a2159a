"""A LLaMA forward pass from scratch: the graded API of assignment s01_transformer."""

from transformer.attention import Attention, attention, causal_mask
from transformer.cache import KVCache
from transformer.config import LlamaConfig
from transformer.generate import generate
from transformer.mlp import MLP
from transformer.model import DecoderLayer, Llama, load_model
from transformer.norm import RMSNorm, rms_norm
from transformer.rope import apply_rope, position_ids_for, rope_cos_sin
from transformer.sampling import (
    GREEDY,
    SamplingParams,
    apply_repetition_penalty,
    min_p_filter,
    process_logits,
    sample,
    top_k_filter,
    top_p_filter,
)

__all__ = [
    "GREEDY",
    "MLP",
    "Attention",
    "DecoderLayer",
    "KVCache",
    "Llama",
    "LlamaConfig",
    "RMSNorm",
    "SamplingParams",
    "apply_repetition_penalty",
    "apply_rope",
    "attention",
    "causal_mask",
    "generate",
    "load_model",
    "min_p_filter",
    "position_ids_for",
    "process_logits",
    "rms_norm",
    "rope_cos_sin",
    "sample",
    "top_k_filter",
    "top_p_filter",
]
