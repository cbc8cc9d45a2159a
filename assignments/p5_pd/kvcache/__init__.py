"""kvcache: paged KV blocks with prefix caching, a radix prefix cache, a continuous-batching
scheduler, and a simulator that replays request traces through them."""

from .block_manager import Block, BlockManager, PrefixCacheStats, hash_block_tokens
from .plotting import plot_comparison
from .radix_cache import PrefixMatch, RadixCache, RadixNode
from .scheduler import Batch, BatchEntry, Scheduler, SchedulerConfig, slot_mapping
from .sequence import Sequence, SequenceStatus
from .simulator import (
    CostModel,
    Request,
    RequestMetrics,
    SimConfig,
    SimResult,
    SimSummary,
    StepRecord,
    as_requests,
    percentile,
    simulate,
    summarize,
)

__all__ = [
    "Batch",
    "BatchEntry",
    "Block",
    "BlockManager",
    "CostModel",
    "PrefixCacheStats",
    "PrefixMatch",
    "RadixCache",
    "RadixNode",
    "Request",
    "RequestMetrics",
    "Scheduler",
    "SchedulerConfig",
    "Sequence",
    "SequenceStatus",
    "SimConfig",
    "SimResult",
    "SimSummary",
    "StepRecord",
    "as_requests",
    "hash_block_tokens",
    "percentile",
    "plot_comparison",
    "simulate",
    "slot_mapping",
    "summarize",
]
