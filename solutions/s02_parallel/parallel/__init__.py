"""parallel: the parallel strategies of one training or inference step on several GPUs. Rank
topology in Megatron-Core's order, tensor-parallel layers and loss, pipeline schedules (validated,
simulated, executed over torch.distributed), and a memory model per GPU under DP x TP x PP x ZeRO."""

from .cross_entropy import vocab_parallel_cross_entropy
from .memory import (
    MemoryBreakdown,
    ModelShape,
    TrainingPlan,
    activation_bytes_per_microbatch,
    memory_per_rank,
    microbatches_in_flight,
    model_shape,
    parameters_per_rank,
)
from .pipeline import (
    Action,
    Timeline,
    afab_schedule,
    bubble_fraction,
    one_f_one_b_schedule,
    run_schedule,
    simulate_schedule,
    validate_schedule,
)
from .tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    VocabParallelEmbedding,
    copy_to_tp_region,
    gather_from_tp_region,
    reduce_from_tp_region,
    scatter_to_tp_region,
    shard_range,
    tp_shard,
)
from .topology import GROUP_KINDS, ParallelConfig, RankCoords, build_groups, group_ranks, rank_coords, rank_of

__all__ = [
    "GROUP_KINDS",
    "Action",
    "ColumnParallelLinear",
    "MemoryBreakdown",
    "ModelShape",
    "ParallelConfig",
    "RankCoords",
    "RowParallelLinear",
    "Timeline",
    "TrainingPlan",
    "VocabParallelEmbedding",
    "activation_bytes_per_microbatch",
    "afab_schedule",
    "bubble_fraction",
    "build_groups",
    "copy_to_tp_region",
    "gather_from_tp_region",
    "group_ranks",
    "memory_per_rank",
    "microbatches_in_flight",
    "model_shape",
    "one_f_one_b_schedule",
    "parameters_per_rank",
    "rank_coords",
    "rank_of",
    "reduce_from_tp_region",
    "run_schedule",
    "scatter_to_tp_region",
    "shard_range",
    "simulate_schedule",
    "tp_shard",
    "validate_schedule",
    "vocab_parallel_cross_entropy",
]
