"""Capstone P4: expert parallelism with DP attention, DeepSeek-V3 style. Dispatch and combine with
all_to_all_single, the EP MoE layer, DP attention with idle ranks, redundant experts placed by
load (EPLB), a Triton grouped GEMM for the experts, and the dispatch traffic between ranks."""

from epmoe.config import MoEConfig
from epmoe.dispatch import DispatchHandle, combine, dispatch, exchange_counts
from epmoe.dp_attention import dp_block_forward, request_attention, rms_norm
from epmoe.ep_layer import ep_moe_forward
from epmoe.experts import experts_grouped, experts_loop, swiglu
from epmoe.grouped_gemm import grouped_gemm, grouped_swiglu
from epmoe.placement import (
                             ExpertPlacement,
                             assign_replicas,
                             contiguous_placement,
                             eplb_placement,
                             imbalance,
                             rank_loads,
)
from epmoe.routing import route
from epmoe.traffic import allgather_bytes, dispatch_counts, plot_traffic, remote_bytes, traffic_matrix

__all__ = ["DispatchHandle", "ExpertPlacement", "MoEConfig", "allgather_bytes", "assign_replicas", "combine",
           "contiguous_placement", "dispatch", "dispatch_counts", "dp_block_forward", "ep_moe_forward",
           "eplb_placement", "exchange_counts", "experts_grouped", "experts_loop", "grouped_gemm",
           "grouped_swiglu", "imbalance", "plot_traffic", "rank_loads", "remote_bytes", "request_attention",
           "rms_norm", "route", "swiglu", "traffic_matrix"]
