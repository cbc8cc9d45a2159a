"""minivllm: a small LLM inference engine with vLLM's core ideas.

Paged KV cache, continuous batching with recompute preemption, chunked prefill, prefix caching,
greedy and sampled decoding, served from an HF LLaMA folder.
"""

from .attention import AttentionMetadata, paged_attention, store_kvcache
from .block_manager import Block, BlockManager, hash_block
from .config import EngineConfig, ModelConfig
from .engine import LLM
from .model_runner import Batch, ModelRunner
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .sampler import sample, sampling_probs
from .sampling_params import SamplingParams
from .scheduler import ScheduledSeq, Scheduler
from .sequence import Sequence, SequenceStatus

__all__ = [
    "LLM", "EngineConfig", "ModelConfig", "SamplingParams", "RequestOutput", "CompletionOutput",
    "RequestMetrics", "Sequence", "SequenceStatus", "Block", "BlockManager", "hash_block", "Scheduler",
    "ScheduledSeq", "ModelRunner", "Batch", "AttentionMetadata", "store_kvcache", "paged_attention",
    "sample", "sampling_probs",
]
