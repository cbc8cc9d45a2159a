"""trainfw: training frameworks from scratch. DDP with gradient buckets that overlap the backward
pass, ZeRO stages 1-3 over a flat parameter vector, and a distributed checkpoint that reshards."""

from .buckets import bucket_assignment
from .checkpoint import load_resharded, save_shard
from .data import LoopState, next_batch
from .ddp import DDP, reachable_parameters
from .sharding import flatten, shard_bounds, shard_size
from .zero import HeldBytes, ZeroAdam

__all__ = [
    "DDP", "HeldBytes", "LoopState", "ZeroAdam", "bucket_assignment", "flatten", "load_resharded",
    "next_batch", "reachable_parameters", "save_shard", "shard_bounds", "shard_size",
]
