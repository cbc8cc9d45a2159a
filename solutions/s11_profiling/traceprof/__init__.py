"""traceprof: reading torch.profiler traces of the course's engines -- the GPU's timeline, launch
joins across the runtime and driver APIs, where the time goes, the largest gap's cause, a roofline
of the GEMMs from recorded shapes, and CUDA graphs of a step."""

from .categories import CATEGORIES, RULES, category_shares, classify
from .events import GPU_CATEGORIES, Event, gpu_events, load_trace
from .gapcause import HOST_CATEGORIES, gap_cause, largest_gap
from .graphs import GraphCaptureError, GraphedStep, bucket_size
from .launches import HOST_CALL_CATEGORIES, OP_CATEGORIES, Launch, enclosing_op, join_launches, time_by_op
from .roofline import DTYPE_BYTES, GEMM_OPS, GemmOp, RooflinePoint, gemm_ops, plot_roofline, roofline
from .timeline import Breakdown, Gap, KernelStat, gaps, kernel_table, merge_intervals, temporal_breakdown

__all__ = [
    "CATEGORIES", "DTYPE_BYTES", "GEMM_OPS", "GPU_CATEGORIES", "HOST_CALL_CATEGORIES", "HOST_CATEGORIES",
    "OP_CATEGORIES", "RULES", "Breakdown", "Event", "Gap", "GemmOp", "GraphCaptureError", "GraphedStep",
    "KernelStat", "Launch", "RooflinePoint", "bucket_size", "category_shares", "classify", "enclosing_op",
    "gap_cause", "gaps", "gemm_ops", "gpu_events", "join_launches", "kernel_table", "largest_gap",
    "load_trace", "merge_intervals", "plot_roofline", "roofline", "temporal_breakdown", "time_by_op",
]
