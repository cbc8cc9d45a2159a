"""tpp: tensor- and pipeline-parallel inference inside the P1 engine (minivllm), on torch.distributed
ranks; a per-rank timeline of compute and communication merged into one trace; and a paper plan of a
TP x PP deployment with an alpha-beta model of its decode step."""

from minivllm import SamplingParams  # re-exported: what generate takes, for callers of this package

from .comm import Comm
from .engine import ParallelLLM, check_model_fits
from .layers import TPMLP, TPAttention, VocabParallelEmbedding, VocabParallelLMHead
from .model import StageModel
from .plan import Hardware, PlanResult, plan_deployment
from .runner import MicroBatch, ParallelRunner, sampling_order, split_microbatches
from .sharding import HeadShard, ParallelConfig, shard_heads, split_range, stage_layers
from .timeline import KINDS, Event, Timeline, chrome_trace, plot_timeline, write_trace

__all__ = [
    "KINDS", "Comm", "Event", "Hardware", "HeadShard", "MicroBatch", "ParallelConfig", "ParallelLLM",
    "ParallelRunner", "PlanResult", "SamplingParams", "StageModel", "TPAttention", "TPMLP", "Timeline", "VocabParallelEmbedding",
    "VocabParallelLMHead", "check_model_fits", "chrome_trace", "plan_deployment", "plot_timeline",
    "sampling_order", "shard_heads", "split_microbatches", "split_range", "stage_layers", "write_trace",
]
