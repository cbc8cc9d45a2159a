"""clustersim: a GPU cluster scheduler simulator -- gang scheduling, topology-aware placement, H200
MIG partitions, FIFO, EASY backfill, priority with quotas and preemption, and a MIG packer."""

from .cluster import Cluster, ClusterSpec, NodeSpec, Pods, Slot
from .jobs import TP_SCOPES, Job, jobs_from_rows
from .mig import (
    DATA_FILE,
    NUM_COMPUTE_SLICES,
    NUM_MEMORY_SLICES,
    MigGpu,
    MigProfile,
    h200_profiles,
    is_valid_layout,
    parse_mig_profiles,
    validate_layout,
)
from .packer import PackResult, pack_mig
from .placement import place_gang, place_mig_pod, place_pod
from .policies import EasyBackfillPolicy, FifoPolicy, Run, SchedState, reservation_time
from .quota import PriorityQuotaPolicy, choose_victims, queue_usage
from .simulator import JobRecord, Segment, SimResult, Summary, simulate, summarize

__all__ = [
    "DATA_FILE",
    "NUM_COMPUTE_SLICES",
    "NUM_MEMORY_SLICES",
    "TP_SCOPES",
    "Cluster",
    "ClusterSpec",
    "EasyBackfillPolicy",
    "FifoPolicy",
    "Job",
    "JobRecord",
    "MigGpu",
    "MigProfile",
    "NodeSpec",
    "PackResult",
    "Pods",
    "PriorityQuotaPolicy",
    "Run",
    "SchedState",
    "Segment",
    "SimResult",
    "Slot",
    "Summary",
    "choose_victims",
    "h200_profiles",
    "is_valid_layout",
    "jobs_from_rows",
    "pack_mig",
    "parse_mig_profiles",
    "place_gang",
    "place_mig_pod",
    "place_pod",
    "queue_usage",
    "reservation_time",
    "simulate",
    "summarize",
    "validate_layout",
]
