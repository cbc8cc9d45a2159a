"""collectives: ring, recursive-doubling and pairwise collectives built from point-to-point
sends and receives on torch.distributed, and their alpha-beta cost model."""

from .alltoall import all_to_all
from .cost import (
    COLLECTIVES,
    LinkModel,
    algbw,
    best_all_reduce,
    bus_factor,
    busbw,
    crossover_bytes,
    pairwise_all_to_all_time,
    recursive_doubling_steps,
    recursive_doubling_time,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
)
from .doubling import recursive_doubling_all_reduce
from .p2p import chunk_sizes, exchange, offsets
from .ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter

__all__ = [
    "COLLECTIVES",
    "LinkModel",
    "algbw",
    "all_to_all",
    "best_all_reduce",
    "bus_factor",
    "busbw",
    "chunk_sizes",
    "crossover_bytes",
    "exchange",
    "offsets",
    "pairwise_all_to_all_time",
    "recursive_doubling_all_reduce",
    "recursive_doubling_steps",
    "recursive_doubling_time",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_all_gather_time",
    "ring_all_reduce_time",
    "ring_reduce_scatter",
    "ring_reduce_scatter_time",
]
