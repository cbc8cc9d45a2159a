"""minivllm: a small LLM inference engine with vLLM's core ideas.

Paged KV cache, continuous batching with recompute preemption, chunked prefill, prefix caching,
greedy and sampled decoding, served from an HF LLaMA folder. Built on stage 5's `kvcache` (blocks,
prefix cache, scheduler) and stage 1's `transformer` (RMSNorm, RoPE), which sit beside it.
"""

from kvcache import Batch, BatchEntry

from .attention import AttentionMetadata, paged_attention, store_kvcache
from .config import EngineConfig, ModelConfig
from .engine import LLM
from .model_runner import ModelInput, ModelRunner
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .pool_check import check_pool
from .sampler import sample, sampling_probs
from .sampling_params import SamplingParams

__all__ = [
    "LLM", "EngineConfig", "ModelConfig", "SamplingParams", "RequestOutput", "CompletionOutput",
    "RequestMetrics", "ModelRunner", "ModelInput", "AttentionMetadata", "store_kvcache", "paged_attention",
    "sample", "sampling_probs", "check_pool",
    "Batch", "BatchEntry",  # stage 5's description of a step, what `ModelRunner.prepare` reads
]
